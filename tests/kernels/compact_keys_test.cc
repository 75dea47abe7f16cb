// The compact key order of a key-padding mask (kernels/sparse/compact_keys.h): whole blocks of the
// kept runs in place, the rest of each run gathered after them, every kept key exactly once and
// no dropped key anywhere, only the last block partial.
#include "kernels/sparse/compact_keys.h"

#include <gtest/gtest.h>

#include <random>

namespace diffattn {
namespace {

std::vector<bool> prompt_mask(int text, int keep, int image) {
  std::vector<bool> m(static_cast<std::size_t>(text + image), true);
  for (int j = keep; j < text; ++j) m[static_cast<std::size_t>(j)] = false;
  return m;
}

void expect_compact(const std::vector<bool>& keep, const CompactKeys& c, int block_n) {
  std::vector<int> seen(keep.size(), 0);
  int kept = 0;
  for (bool k : keep) kept += k;
  ASSERT_EQ(c.count, kept);
  ASSERT_EQ(static_cast<int>(c.block_rows.size()), (kept + block_n - 1) / block_n);
  ASSERT_LE(static_cast<int>(c.gathered.size()), kept);
  // The in-place blocks hold whole blocks, so the gathered rows fill the rest.
  const int gathered_blocks = (static_cast<int>(c.gathered.size()) + block_n - 1) / block_n;
  const int in_place = static_cast<int>(c.block_rows.size()) - gathered_blocks;
  EXPECT_EQ(in_place * block_n + static_cast<int>(c.gathered.size()), kept);
  for (int n = 0; n < static_cast<int>(c.block_rows.size()); ++n) {
    const std::int32_t row = c.block_rows[static_cast<std::size_t>(n)];
    if (n >= in_place) {
      EXPECT_EQ(row, gathered_block_row((n - in_place) * block_n)) << "gathered blocks follow in order";
      continue;
    }
    ASSERT_GE(row, 0) << "in-place blocks come first";
    ASSERT_LE(row + block_n, static_cast<int>(keep.size()));
    for (int j = row; j < row + block_n; ++j) {
      EXPECT_TRUE(keep[static_cast<std::size_t>(j)]) << "key " << j << " of block " << n;
      ++seen[static_cast<std::size_t>(j)];
    }
  }
  for (std::int32_t key : c.gathered) {
    ASSERT_GE(key, 0);
    ASSERT_LT(key, static_cast<int>(keep.size()));
    EXPECT_TRUE(keep[static_cast<std::size_t>(key)]) << "gathered key " << key;
    ++seen[static_cast<std::size_t>(key)];
  }
  for (std::size_t j = 0; j < keep.size(); ++j) EXPECT_EQ(seen[j], keep[j] ? 1 : 0) << "key " << j;
}

TEST(CompactKeys, APaddedPromptFirstGathersOnlyThePrompt) {
  // FLUX.1: 77 of 512 text keys, then 4096 image keys.
  const auto keep = prompt_mask(512, 77, 4096);
  const CompactKeys c = compact_keys(keep, 128);
  expect_compact(keep, c, 128);
  ASSERT_EQ(c.block_rows.size(), 33u);
  for (int n = 0; n < 32; ++n) EXPECT_EQ(c.block_rows[static_cast<std::size_t>(n)], 512 + 128 * n);
  EXPECT_EQ(c.block_rows[32], gathered_block_row(0));
  ASSERT_EQ(c.gathered.size(), 77u);
  for (int r = 0; r < 77; ++r) EXPECT_EQ(c.gathered[static_cast<std::size_t>(r)], r);
}

TEST(CompactKeys, AKeptPrefixGathersItsLastPartialBlock) {
  // SD3 in diffusers' order: 4096 image keys, then 154 of 333 prompt keys.
  std::vector<bool> keep(4429, false);
  for (int j = 0; j < 4250; ++j) keep[static_cast<std::size_t>(j)] = true;
  const CompactKeys c = compact_keys(keep, 128);
  expect_compact(keep, c, 128);
  EXPECT_EQ(c.block_rows.size(), 34u);
  EXPECT_EQ(c.gathered.size(), 4250u - 33 * 128);
  EXPECT_EQ(c.gathered.front(), 33 * 128);
  // A whole number of blocks gathers nothing.
  EXPECT_TRUE(compact_keys(std::vector<bool>(512, true), 128).gathered.empty());
  EXPECT_EQ(compact_keys(std::vector<bool>(300, false), 128), CompactKeys{});
}

TEST(CompactKeys, RandomRunsAreCoveredExactlyOnce) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    const int skv = 1 + static_cast<int>(rng() % 2000);
    const int block_n = trial % 2 ? 128 : 176;
    const double p_flip = (trial % 5 + 1) * 0.01 * (trial % 3 ? 1 : 20);
    std::vector<bool> keep(static_cast<std::size_t>(skv));
    bool on = rng() % 2;
    for (auto&& k : keep) {
      if (std::uniform_real_distribution<double>(0, 1)(rng) < p_flip) on = !on;
      k = on;
    }
    expect_compact(keep, compact_keys(keep, block_n), block_n);
  }
}

}  // namespace
}  // namespace diffattn
