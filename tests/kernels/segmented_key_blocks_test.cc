// The segmented tiles of 64 x 64 lists (what the Hopper walk loads and attends for FASTVIDEO_VSA's
// cubes) against the lists themselves: expanding every query CTA's boxes gives each valid query row
// once, and for each such row, expanding its CTA's key blocks into the keys its warp attends gives
// exactly the valid keys of the tiles its own tile lists; with as few blocks as the packing allows.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/sparse/segmented_key_blocks.h"
#include "kernels/sparse/vsa_cube_map.h"

namespace diffattn {
namespace {

// The rows a block's boxes cover for warp `warp` (every warp: -1), as rows of the padded sequence.
std::vector<std::int64_t> block_rows(const SegmentedBlock& b, int warp) {
  std::vector<std::int64_t> rows;
  const bool one_box = b.w[1] == -1;
  for (int i = 0; i < (one_box ? 1 : kSegmentsPerBlock); ++i) {
    const int n = warp < 0 ? segment_word_rows(b.w[i]) : segment_word_rows_for(b.w[i], warp);
    EXPECT_LE(segment_word_rows(b.w[i]), one_box ? kSegmentTile : kSegmentRows);
    for (int r = 0; r < n; ++r) rows.push_back(segment_word_row(b.w[i]) + r);
  }
  return rows;
}

// Blocks are whole tiles (one box from a tile's first row) first, then boxes of at most 16 rows
// within one tile; empty boxes only in the last block.
void expect_well_formed(const std::vector<SegmentedBlock>& blocks, int wholes) {
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
      EXPECT_LE(segment_word_row(b.w[k]) % 64 + segment_word_rows(b.w[k]), 64) << "a box stays within its tile";
      EXPECT_GT(segment_word_rows(b.w[k]), 0);
    }
  }
}

TEST(SegmentedKeyBlocks, EveryQueryRowAttendsExactlyTheKeysItsTileLists) {
  std::mt19937 rng(std::random_device{}());
  for (const auto& [frames, height, width] :
       {std::array<int, 3>{5, 6, 7}, {9, 10, 12}, {9, 13, 18}, {8, 8, 8}, {1, 1, 3}, {3, 7, 2}, {6, 5, 10}}) {
    const VsaCubeMap map{frames, height, width};
    SCOPED_TRACE(std::to_string(frames) + "x" + std::to_string(height) + "x" + std::to_string(width));
    const int tiles = static_cast<int>(map.cubes());
    std::vector<std::int32_t> tile_rows(static_cast<std::size_t>(tiles));
    for (int c = 0; c < tiles; ++c) tile_rows[static_cast<std::size_t>(c)] = map.valid(c);
    for (int trial = 0; trial < 6; ++trial) {
      // Random ascending lists of distinct tiles per query tile (all tiles, none, or a random share).
      const double keep = trial == 0 ? 1.0 : trial == 1 ? 0.0 : std::uniform_real_distribution<double>(0.02, 1.0)(rng);
      std::vector<std::vector<std::int32_t>> lists(static_cast<std::size_t>(tiles));
      int longest = 0;
      for (auto& list : lists) {
        for (std::int32_t c = 0; c < tiles; ++c)
          if (std::bernoulli_distribution(keep)(rng)) list.push_back(c);
        longest = std::max(longest, static_cast<int>(list.size()));
      }
      const auto list_of = [&](std::int32_t t) {
        return std::pair<const std::int32_t*, int>(lists[static_cast<std::size_t>(t)].data(),
                                                   static_cast<int>(lists[static_cast<std::size_t>(t)].size()));
      };
      const std::vector<SegmentedBlock> ctas = segment_query_tiles(tile_rows.data(), tiles);
      const SegmentedLists plan = plan_segmented_lists(tile_rows, 1, longest);
      ASSERT_EQ(static_cast<int>(ctas.size()), plan.query_ctas);
      ASSERT_LE(plan.query_ctas, tiles);
      expect_well_formed(ctas, plan.whole_ctas);
      std::multiset<std::int64_t> query_rows;
      for (int x = 0; x < plan.query_ctas; ++x) {
        const SegmentedBlock& q = ctas[static_cast<std::size_t>(x)];
        const std::vector<SegmentEntry> entries = query_block_union(q, list_of);
        const std::vector<SegmentedBlock> blocks =
            segment_entries(entries.data(), static_cast<int>(entries.size()), tile_rows.data());
        ASSERT_LE(static_cast<int>(blocks.size()), x < plan.whole_ctas ? plan.whole_capacity : plan.packed_capacity);
        int wholes = 0;
        for (const SegmentEntry& e : entries) wholes += tile_is_whole(tile_rows[static_cast<std::size_t>(e.tile)]);
        expect_well_formed(blocks, wholes);
        // Each warp's query rows (a one-box CTA's rows are its tile's first rows, four per warp...)
        for (int warp = 0; warp < 4; ++warp) {
          std::vector<std::int64_t> rows;
          if (q.w[1] == -1) {
            const int n = segment_word_rows(q.w[0]);
            for (int r = warp * 16; r < std::min(n, warp * 16 + 16); ++r) rows.push_back(segment_word_row(q.w[0]) + r);
          } else {
            for (int r = 0; r < segment_word_rows(q.w[warp]); ++r) rows.push_back(segment_word_row(q.w[warp]) + r);
          }
          if (rows.empty()) continue;
          const std::int32_t tile = static_cast<std::int32_t>(rows[0] / 64);
          std::multiset<std::int64_t> want, got;
          for (const std::int32_t k : lists[static_cast<std::size_t>(tile)])
            for (int r = 0; r < tile_rows[static_cast<std::size_t>(k)]; ++r) want.insert(std::int64_t{k} * 64 + r);
          for (const SegmentedBlock& b : blocks)
            for (const std::int64_t r : block_rows(b, warp)) got.insert(r);
          ASSERT_EQ(got, want) << "trial " << trial << " CTA " << x << " warp " << warp;
          for (const std::int64_t r : rows) {
            EXPECT_EQ(r / 64, tile) << "a warp's rows lie in one tile";
            query_rows.insert(r);
          }
        }
        // Every union entry is needed by some warp, and packing leaves no more than one block short.
        int segments = 0;
        for (const SegmentEntry& e : entries) {
          EXPECT_NE(e.members, 0);
          segments += tile_segments(tile_rows[static_cast<std::size_t>(e.tile)]);
        }
        EXPECT_EQ(static_cast<int>(blocks.size()), wholes + (segments + 3) / 4);
      }
      std::multiset<std::int64_t> all_rows;
      for (int t = 0; t < tiles; ++t)
        for (int r = 0; r < tile_rows[static_cast<std::size_t>(t)]; ++r) all_rows.insert(std::int64_t{t} * 64 + r);
      ASSERT_EQ(query_rows, all_rows) << "every valid query row in exactly one CTA";
    }
  }
}

TEST(SegmentedKeyBlocks, PartialCubesShareCtasAndBlocks) {
  // Wan2.1 720p's latent (21 x 45 x 80): 1100 whole cubes, 320 of 16 tokens and 20 of 4.
  const VsaCubeMap map{21, 45, 80};
  std::vector<std::int32_t> tile_rows;
  for (std::int64_t c = 0; c < map.cubes(); ++c) tile_rows.push_back(map.valid(c));
  const SegmentedLists plan = plan_segmented_lists(tile_rows, 40, 180);
  EXPECT_EQ(plan.whole_ctas, 1100);
  EXPECT_EQ(plan.query_ctas, 1100 + 85);
  EXPECT_EQ(plan.packed_capacity, 720);
  EXPECT_EQ(plan.block_capacity(), 40 * (1100 * 180 + 85 * 720));
}

TEST(SegmentedKeyBlocks, WordsKeepRowsCountsAndMembersUpToTheLimit) {
  for (const std::int64_t row : {std::int64_t{0}, std::int64_t{16}, std::int64_t{64 * 1440 + 48}, kMaxSegmentedRows - 16})
    for (const int n : {0, 1, 15, 16, 48, 64})
      for (const int members : {1, 5, kAllMembers}) {
        const std::int32_t w = segment_word(row, n, members);
        EXPECT_GE(w, 0);
        EXPECT_EQ(segment_word_row(w), row);
        EXPECT_EQ(segment_word_rows(w), n);
        EXPECT_EQ(segment_word_members(w), members);
        for (int warp = 0; warp < 4; ++warp) EXPECT_EQ(segment_word_rows_for(w, warp), (members >> warp & 1) ? n : 0);
      }
  EXPECT_EQ(segment_word_rows(-1), 0);
  EXPECT_EQ(segment_word_rows_for(-1, 0), 0);
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
