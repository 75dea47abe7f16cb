#pragma once
// Key blocks of the one-warpgroup walk over lists of padded 64-row tiles (FASTVIDEO_VSA's cubes,
// whose tile rows say how many leading rows of each tile are tokens). A whole tile is one block of
// 64 keys. A partial tile (at most 48 valid rows) costs only its 16-row segments, and the segments
// of a list's partial tiles are packed four to a block: a cube at the video's edge holding 16 tokens
// takes a quarter of a block's products instead of a whole block's.
//
// A block is four words; a word is (first row / 16) << 7 | rows attended (0..64).
//  - w[1] == -1: one 64-row box from w[0]'s first row, its first `rows` keys attended: a whole tile,
//    or a block holding one segment (the box's rows past the segment are never attended).
//  - otherwise: four 16-row boxes, box i from w[i]; w[i] == -1 is an empty box (w[0]'s rows loaded
//    again, none attended), and only the last block of a list has empty boxes.
// A list's whole tiles come first, in list order, then its partial tiles' segments in list order.
// The walk's online softmax does not depend on the order of blocks (only its rounding does).
// The CUDA kernel that builds the blocks for every list (segment_lists_kernel.cuh) and the walk
// (listed_walk_hopper.cuh) share these definitions; segment_key_list is their host oracle.

#include <cstdint>
#include <vector>

#include "kernels/sparse/host_device.h"

namespace diffattn {

inline constexpr int kSegmentTile = 64;        // the tiling whose lists are segmented
inline constexpr int kSegmentRows = 16;        // rows of a segment
inline constexpr int kSegmentsPerBlock = kSegmentTile / kSegmentRows;
// First rows / 16 must fit the word's 25 high bits.
inline constexpr std::int64_t kMaxSegmentedRows = std::int64_t{1} << 28;

struct alignas(16) SegmentedBlock {
  std::int32_t w[4];
};

DIFFATTN_HOST_DEVICE constexpr std::int32_t segment_word(std::int64_t first_row, int rows) {
  return static_cast<std::int32_t>((first_row / kSegmentRows) << 7 | rows);
}
DIFFATTN_HOST_DEVICE constexpr std::int64_t segment_word_row(std::int32_t word) {
  return static_cast<std::int64_t>(word >> 7) * kSegmentRows;
}
DIFFATTN_HOST_DEVICE constexpr int segment_word_rows(std::int32_t word) { return word < 0 ? 0 : word & 127; }

// Segments of a tile with `valid` leading rows: 0 for a whole tile (its own block; also any tile
// past 48 rows, which would need all four segments), else one per started 16 rows.
DIFFATTN_HOST_DEVICE constexpr int tile_segments(int valid) {
  return valid > kSegmentTile - kSegmentRows ? 0 : (valid + kSegmentRows - 1) / kSegmentRows;
}
DIFFATTN_HOST_DEVICE constexpr bool tile_is_whole(int valid) {
  return valid > kSegmentTile - kSegmentRows;
}

// The blocks of one list: tiles[0..len) (64-row tile indices), valid rows from tile_rows.
inline std::vector<SegmentedBlock> segment_key_list(const std::int32_t* tiles, int len,
                                                    const std::int32_t* tile_rows) {
  std::vector<SegmentedBlock> blocks;
  std::vector<std::int32_t> segments;
  for (int i = 0; i < len; ++i) {
    const std::int32_t tile = tiles[i];
    const int valid = tile_rows[tile];
    const std::int64_t row = std::int64_t{tile} * kSegmentTile;
    if (tile_is_whole(valid)) {
      blocks.push_back({{segment_word(row, valid), -1, -1, -1}});
      continue;
    }
    for (int s = 0; s < tile_segments(valid); ++s) {
      const int rows = valid - s * kSegmentRows < kSegmentRows ? valid - s * kSegmentRows : kSegmentRows;
      segments.push_back(segment_word(row + s * kSegmentRows, rows));
    }
  }
  for (std::size_t s = 0; s < segments.size(); s += kSegmentsPerBlock) {
    SegmentedBlock b{{-1, -1, -1, -1}};
    for (std::size_t i = 0; i < kSegmentsPerBlock && s + i < segments.size(); ++i) b.w[i] = segments[s + i];
    blocks.push_back(b);
  }
  return blocks;
}

}  // namespace diffattn
