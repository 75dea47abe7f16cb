// The segmented key blocks of a 64 x 64 list (what the Hopper walk loads and attends for FASTVIDEO_VSA's
// cubes) against the list itself: expanding every block's boxes into the keys they attend gives each
// valid key of each listed tile exactly once and nothing else, with as few blocks as the packing allows.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/sparse/segmented_key_blocks.h"
#include "kernels/sparse/vsa_cube_map.h"

namespace diffattn {
namespace {

// The keys a block attends, as rows of the padded sequence: one 64-row box, or four 16-row boxes.
std::vector<std::int64_t> attended_rows(const SegmentedBlock& b) {
  std::vector<std::int64_t> rows;
  const bool one_box = b.w[1] == -1;
  for (int i = 0; i < (one_box ? 1 : kSegmentsPerBlock); ++i) {
    const int n = segment_word_rows(b.w[i]);
    EXPECT_LE(n, one_box ? kSegmentTile : kSegmentRows);
    for (int r = 0; r < n; ++r) rows.push_back(segment_word_row(b.w[i]) + r);
  }
  return rows;
}

TEST(SegmentedKeyBlocks, EveryListedKeyIsAttendedOnceInTheFewestBlocks) {
  std::mt19937 rng(std::random_device{}());
  for (const auto& [frames, height, width] :
       {std::array<int, 3>{5, 6, 7}, {21, 30, 52}, {21, 45, 80}, {9, 13, 18}, {8, 8, 8}, {1, 1, 3}, {3, 7, 2}}) {
    const VsaCubeMap map{frames, height, width};
    SCOPED_TRACE(std::to_string(frames) + "x" + std::to_string(height) + "x" + std::to_string(width));
    std::vector<std::int32_t> tile_rows(static_cast<std::size_t>(map.cubes()));
    for (std::int64_t c = 0; c < map.cubes(); ++c) tile_rows[static_cast<std::size_t>(c)] = map.valid(c);
    for (int trial = 0; trial < 20; ++trial) {
      // A random ascending list of distinct cubes (sometimes all of them, sometimes none).
      std::vector<std::int32_t> list;
      const double keep = trial == 0 ? 1.0 : trial == 1 ? 0.0 : std::uniform_real_distribution<double>(0.02, 1.0)(rng);
      for (std::int32_t c = 0; c < map.cubes(); ++c)
        if (std::bernoulli_distribution(keep)(rng)) list.push_back(c);
      const std::vector<SegmentedBlock> blocks =
          segment_key_list(list.data(), static_cast<int>(list.size()), tile_rows.data());

      std::multiset<std::int64_t> expected, got;
      int wholes = 0, segments = 0;
      for (const std::int32_t c : list) {
        for (int r = 0; r < tile_rows[static_cast<std::size_t>(c)]; ++r) expected.insert(std::int64_t{c} * 64 + r);
        if (tile_is_whole(tile_rows[static_cast<std::size_t>(c)]))
          ++wholes;
        else
          segments += (tile_rows[static_cast<std::size_t>(c)] + 15) / 16;
      }
      for (const SegmentedBlock& b : blocks)
        for (const std::int64_t r : attended_rows(b)) got.insert(r);
      ASSERT_EQ(got, expected) << "trial " << trial;
      ASSERT_EQ(static_cast<int>(blocks.size()), wholes + (segments + 3) / 4) << "trial " << trial;
      ASSERT_LE(blocks.size(), list.size());
      // Whole tiles first (one box from a tile's first row), then boxes of 16 rows within one tile;
      // empty boxes only at the end of the last block.
      for (std::size_t i = 0; i < blocks.size(); ++i) {
        const SegmentedBlock& b = blocks[i];
        if (i < static_cast<std::size_t>(wholes)) {
          EXPECT_EQ(b.w[1], -1);
          EXPECT_EQ(segment_word_row(b.w[0]) % 64, 0);
          EXPECT_TRUE(tile_is_whole(segment_word_rows(b.w[0])));
          continue;
        }
        for (int k = 0; k < 4; ++k) {
          if (b.w[k] == -1) {
            EXPECT_EQ(i + 1, blocks.size());
            EXPECT_GT(k, 0);
            continue;
          }
          const std::int64_t row = segment_word_row(b.w[k]);
          EXPECT_LE(row % 64 + segment_word_rows(b.w[k]), 64) << "a box stays within its tile";
          EXPECT_GT(segment_word_rows(b.w[k]), 0);
        }
      }
    }
  }
}

TEST(SegmentedKeyBlocks, WordsKeepRowsAndCountsUpToTheLimit) {
  for (const std::int64_t row : {std::int64_t{0}, std::int64_t{16}, std::int64_t{64 * 1440 + 48}, kMaxSegmentedRows - 16})
    for (const int n : {0, 1, 15, 16, 48, 64}) {
      const std::int32_t w = segment_word(row, n);
      EXPECT_GE(w, 0);
      EXPECT_EQ(segment_word_row(w), row);
      EXPECT_EQ(segment_word_rows(w), n);
    }
  EXPECT_EQ(segment_word_rows(-1), 0);
  // A tile is whole past 48 rows (it would need every box), else one segment per started 16 rows.
  EXPECT_EQ(tile_segments(64), 0);
  EXPECT_EQ(tile_segments(49), 0);
  EXPECT_EQ(tile_segments(48), 3);
  EXPECT_EQ(tile_segments(17), 2);
  EXPECT_EQ(tile_segments(16), 1);
  EXPECT_EQ(tile_segments(1), 1);
}

}  // namespace
}  // namespace diffattn
