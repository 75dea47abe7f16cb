// The key walk a key-padding mask gives the Hopper kernel (kernels/sparse/key_walk.h): runs when
// they need no more entries than the aligned blocks, aligned blocks otherwise, and either way every
// kept key covered exactly once and no dropped key attended without its bits.
#include "kernels/sparse/key_walk.h"

#include <gtest/gtest.h>

#include <random>

namespace diffattn {
namespace {

std::vector<bool> prompt_mask(int text, int keep, int image) {
  std::vector<bool> m(static_cast<std::size_t>(text + image), true);
  for (int j = keep; j < text; ++j) m[static_cast<std::size_t>(j)] = false;
  return m;
}

// Every kept key lies in exactly one entry; an entry without bits holds kept keys only.
void expect_covers(const std::vector<bool>& keep, const std::vector<KeyWalkEntry>& walk, int block_n) {
  std::vector<int> seen(keep.size(), 0);
  int previous_end = 0;
  for (const KeyWalkEntry& e : walk) {
    ASSERT_GE(e.key0, previous_end);
    ASSERT_GE(e.len, 1);
    ASSERT_LE(e.len, block_n);
    ASSERT_LE(e.key0 + e.len, static_cast<int>(keep.size()));
    if (e.bits) EXPECT_EQ(e.key0 % block_n, 0) << "bits are read only from aligned blocks";
    for (int j = e.key0; j < e.key0 + e.len; ++j) {
      if (!e.bits) EXPECT_TRUE(keep[static_cast<std::size_t>(j)]) << "key " << j;
      ++seen[static_cast<std::size_t>(j)];
    }
    previous_end = e.key0 + e.len;
  }
  for (std::size_t j = 0; j < keep.size(); ++j)
    if (keep[j]) EXPECT_EQ(seen[j], 1) << "key " << j;
}

TEST(KeyWalk, APaddedPromptFirstWalksItsTwoRuns) {
  // FLUX.1: 77 of 512 text keys, then 4096 image keys, 176-key blocks.
  const auto keep = prompt_mask(512, 77, 4096);
  const auto walk = key_walk(keep, 176, false);
  ASSERT_FALSE(walk.empty());
  EXPECT_EQ(walk[0], (KeyWalkEntry{0, 77, true}));  // aligned, and the next run starts past its block: bits
  EXPECT_EQ(walk[1], (KeyWalkEntry{512, 176, false}));
  EXPECT_EQ(walk.back(), (KeyWalkEntry{512 + 23 * 176, 4096 - 23 * 176, false}));
  EXPECT_EQ(walk.size(), 25u);  // aligned: 26 blocks keep a key
  expect_covers(keep, walk, 176);
  // Causal launches take the aligned blocks: the first (77 kept) and the one holding key 512 read bits.
  const auto aligned = key_walk(keep, 176, true);
  EXPECT_EQ(aligned.size(), 26u);
  EXPECT_EQ(aligned[0], (KeyWalkEntry{0, 176, true}));
  EXPECT_EQ(aligned[1], (KeyWalkEntry{352, 176, true}));
  expect_covers(keep, aligned, 176);
}

TEST(KeyWalk, ScatteredKeysWalkTheAlignedBlocks) {
  std::mt19937_64 rng(std::random_device{}());
  std::bernoulli_distribution coin(0.5);
  std::vector<bool> keep(1000);
  for (std::size_t j = 0; j < keep.size(); ++j) keep[j] = coin(rng);
  const auto walk = key_walk(keep, 128, false);
  ASSERT_EQ(walk.size(), 8u);  // about 250 runs against 8 blocks
  for (const KeyWalkEntry& e : walk) EXPECT_TRUE(e.bits || e.len == 128);
  expect_covers(keep, walk, 128);
}

TEST(KeyWalk, PrefixesEmptyMasksAndRandomRunsAreCoveredExactlyOnce) {
  EXPECT_TRUE(key_walk(std::vector<bool>(300, false), 128, false).empty());
  EXPECT_TRUE(key_walk(std::vector<bool>(300, false), 128, true).empty());
  const auto prefix = key_walk(prompt_mask(300, 130, 0), 128, false);
  EXPECT_EQ(prefix, (std::vector<KeyWalkEntry>{{0, 128, false}, {128, 2, true}}));
  // A run's partial entry keeps the limit where its block is not aligned or holds the next run's keys.
  std::vector<bool> two_runs(400, false);
  for (int j = 10; j < 140; ++j) two_runs[static_cast<std::size_t>(j)] = true;   // partial entry at 138, unaligned
  for (int j = 200; j < 290; ++j) two_runs[static_cast<std::size_t>(j)] = true;  // entry at 200, unaligned
  EXPECT_EQ(key_walk(two_runs, 128, false),
            (std::vector<KeyWalkEntry>{{10, 128, false}, {138, 2, false}, {200, 90, false}}));
  std::vector<bool> close_runs(400, false);
  for (int j = 0; j < 50; ++j) close_runs[static_cast<std::size_t>(j)] = true;    // aligned, next run inside its block
  for (int j = 100; j < 400; ++j) close_runs[static_cast<std::size_t>(j)] = true;
  const auto close = key_walk(close_runs, 128, false);
  ASSERT_FALSE(close.empty());
  EXPECT_EQ(close[0], (KeyWalkEntry{0, 50, false}));
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    const int skv = std::uniform_int_distribution<int>(1, 2000)(rng);
    const int runs = std::uniform_int_distribution<int>(0, 6)(rng);
    std::vector<bool> keep(static_cast<std::size_t>(skv), false);
    for (int r = 0; r < runs; ++r) {
      const int a = std::uniform_int_distribution<int>(0, skv - 1)(rng);
      const int len = std::uniform_int_distribution<int>(1, 700)(rng);
      for (int j = a; j < std::min(skv, a + len); ++j) keep[static_cast<std::size_t>(j)] = true;
    }
    for (int block_n : {64, 128, 176, 192}) {
      for (bool aligned_only : {false, true}) {
        const auto walk = key_walk(keep, block_n, aligned_only);
        expect_covers(keep, walk, block_n);
        const auto aligned = key_walk(keep, block_n, true);
        EXPECT_LE(walk.size(), aligned.size());
        if (aligned_only) EXPECT_EQ(walk, aligned);
      }
    }
  }
}

}  // namespace
}  // namespace diffattn
