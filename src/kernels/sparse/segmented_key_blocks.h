#pragma once
// Segmented tiles for the one-warpgroup walk over lists of padded 64-row tiles (FASTVIDEO_VSA's
// cubes, whose tile rows say how many leading rows of each tile are tokens). A whole tile costs a
// 64-row block; a partial tile (at most 48 valid rows) costs only its 16-row segments, packed four
// to a block, on both sides of the product:
//  - query side: the walk's CTAs take the whole tiles one each, then the partial tiles' segments
//    four to a CTA (a segment is one warp's 16 rows), so that a cube at the video's edge holding 16
//    tokens takes a quarter of a CTA;
//  - key side: each CTA walks the union of its segments' lists, whole key tiles one 64-key block
//    each, then the partial key tiles' segments four to a block, each segment tagged with the
//    CTA's warps whose lists name its tile (the others never attend it).
//
// A block (query or key) is four words; a word is
//   (first row / 16) << 11 | members << 7 | rows, rows in 0..64, members 4 bits (bit w: warp w).
//  - w[1] == -1: one 64-row box from w[0]'s first row, its first `rows` rows used (a whole tile, or
//    a block holding one segment: the box's rows past it are never used).
//  - otherwise: four 16-row boxes, box i from w[i]; w[i] == -1 is an empty box (w[0]'s rows loaded
//    again, none used), and only a last block has empty boxes.
// Query words carry every warp as members; a key word's members say which of the CTA's warps attend
// its rows (for a one-box query CTA, all of them).
// Order: whole tiles first, in order, then the partial tiles' segments in order. The walk's online
// softmax does not depend on the order of key blocks (only its rounding does).
// The CUDA kernels that build them (segment_lists_kernel.cuh) and the walk (listed_walk_hopper.cuh)
// share these definitions; the host functions below are their oracle.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/sparse/host_device.h"

namespace diffattn {

inline constexpr int kSegmentTile = 64;  // the tiling whose lists are segmented
inline constexpr int kSegmentRows = 16;  // rows of a segment: one warp's rows of a CTA
inline constexpr int kSegmentsPerBlock = kSegmentTile / kSegmentRows;
inline constexpr int kAllMembers = (1 << kSegmentsPerBlock) - 1;
// First rows / 16 must fit the word's 20 high bits.
inline constexpr std::int64_t kMaxSegmentedRows = std::int64_t{1} << 24;

struct alignas(16) SegmentedBlock {
  std::int32_t w[4];
};

DIFFATTN_HOST_DEVICE constexpr std::int32_t segment_word(std::int64_t first_row, int rows, int members) {
  return static_cast<std::int32_t>((first_row / kSegmentRows) << 11 | members << 7 | rows);
}
DIFFATTN_HOST_DEVICE constexpr std::int64_t segment_word_row(std::int32_t word) {
  return static_cast<std::int64_t>(word >> 11) * kSegmentRows;
}
DIFFATTN_HOST_DEVICE constexpr int segment_word_rows(std::int32_t word) { return word < 0 ? 0 : word & 127; }
DIFFATTN_HOST_DEVICE constexpr int segment_word_members(std::int32_t word) { return word < 0 ? 0 : (word >> 7) & 15; }
// The rows of `word` that warp `warp` uses: all of them for a member, none otherwise.
DIFFATTN_HOST_DEVICE constexpr int segment_word_rows_for(std::int32_t word, int warp) {
  return (segment_word_members(word) >> warp & 1) != 0 ? segment_word_rows(word) : 0;
}

// Segments of a tile with `valid` leading rows: 0 for a whole tile (its own block; also any tile
// past 48 rows, which would need all four segments), else one per started 16 rows.
DIFFATTN_HOST_DEVICE constexpr bool tile_is_whole(int valid) { return valid > kSegmentTile - kSegmentRows; }
DIFFATTN_HOST_DEVICE constexpr int tile_segments(int valid) {
  return tile_is_whole(valid) ? 0 : (valid + kSegmentRows - 1) / kSegmentRows;
}
// Rows of segment s of a partial tile with `valid` rows.
DIFFATTN_HOST_DEVICE constexpr int segment_rows(int valid, int s) {
  return valid - s * kSegmentRows < kSegmentRows ? valid - s * kSegmentRows : kSegmentRows;
}

// A list entry with the warps that attend it.
struct SegmentEntry {
  std::int32_t tile;
  int members;
};

// The blocks of entries[0..len) (64-row tile indices, valid rows from tile_rows).
inline std::vector<SegmentedBlock> segment_entries(const SegmentEntry* entries, int len,
                                                   const std::int32_t* tile_rows) {
  std::vector<SegmentedBlock> blocks;
  std::vector<std::int32_t> segments;
  for (int i = 0; i < len; ++i) {
    const int valid = tile_rows[entries[i].tile];
    const std::int64_t row = std::int64_t{entries[i].tile} * kSegmentTile;
    if (tile_is_whole(valid)) {
      blocks.push_back({{segment_word(row, valid, entries[i].members), -1, -1, -1}});
      continue;
    }
    for (int s = 0; s < tile_segments(valid); ++s)
      segments.push_back(segment_word(row + s * kSegmentRows, segment_rows(valid, s), entries[i].members));
  }
  for (std::size_t s = 0; s < segments.size(); s += kSegmentsPerBlock) {
    SegmentedBlock b{{-1, -1, -1, -1}};
    for (std::size_t i = 0; i < kSegmentsPerBlock && s + i < segments.size(); ++i) b.w[i] = segments[s + i];
    blocks.push_back(b);
  }
  return blocks;
}

// The walk's query CTAs over `tiles` tiles: the blocks of the list of every tile.
inline std::vector<SegmentedBlock> segment_query_tiles(const std::int32_t* tile_rows, int tiles) {
  std::vector<SegmentEntry> all;
  for (int t = 0; t < tiles; ++t) all.push_back({t, kAllMembers});
  return segment_entries(all.data(), tiles, tile_rows);
}

// Whole tiles among `tiles` (the query CTAs that come first, one tile each).
inline int whole_tile_count(const std::int32_t* tile_rows, int tiles) {
  int n = 0;
  for (int t = 0; t < tiles; ++t) n += tile_is_whole(tile_rows[t]) ? 1 : 0;
  return n;
}

// The distinct tiles of a query CTA's boxes, in box order, each with the warps (boxes) it holds: a
// one-box CTA is its tile's with every warp; `out` has room for 4. Returns how many.
DIFFATTN_HOST_DEVICE inline int query_block_tiles(const std::int32_t (&w)[4], std::int32_t (&tiles)[4],
                                                  int (&members)[4]) {
  if (w[1] == -1) {
    tiles[0] = static_cast<std::int32_t>(segment_word_row(w[0]) / kSegmentTile);
    members[0] = kAllMembers;
    return 1;
  }
  int n = 0;
  for (int i = 0; i < kSegmentsPerBlock; ++i) {
    if (w[i] == -1) continue;
    const auto tile = static_cast<std::int32_t>(segment_word_row(w[i]) / kSegmentTile);
    int k = 0;
    while (k < n && tiles[k] != tile) ++k;
    if (k == n) {
      tiles[n] = tile;
      members[n] = 0;
      ++n;
    }
    members[k] |= 1 << i;
  }
  return n;
}

// The union of the lists of a query CTA's tiles, each entry with the warps whose tile lists it: the
// first tile's list in order, then each next tile's entries that no earlier tile lists.
// lists(t) gives tile t's list as (pointer, length), ascending.
template <class Lists>
std::vector<SegmentEntry> query_block_union(const SegmentedBlock& q, const Lists& lists) {
  std::int32_t tiles[4];
  int members[4];
  const std::int32_t w[4] = {q.w[0], q.w[1], q.w[2], q.w[3]};
  const int n = query_block_tiles(w, tiles, members);
  auto lists_it = [&](int k, std::int32_t e) {
    const auto [p, len] = lists(tiles[k]);
    return std::binary_search(p, p + len, e);
  };
  std::vector<SegmentEntry> out;
  for (int k = 0; k < n; ++k) {
    const auto [p, len] = lists(tiles[k]);
    for (int i = 0; i < len; ++i) {
      bool earlier = false;
      for (int j = 0; j < k && !earlier; ++j) earlier = lists_it(j, p[i]);
      if (earlier) continue;
      int m = members[k];
      for (int j = k + 1; j < n; ++j) m |= lists_it(j, p[i]) ? members[j] : 0;
      out.push_back({p[i], m});
    }
  }
  return out;
}

// The buffers of the segmented lists of `groups` (batch x query heads) sets of `tiles` lists over
// tiles with valid rows tile_rows (64 x 64 self-attention over padded tiles), each list at most
// max_list long: sizes from plan_segmented_lists, device pointers from the caller (CUDA:
// flash::build_segmented_lists_cuda fills them, the block-sparse walk reads them).
struct SegmentedLists {
  int tiles = 0;
  std::int64_t groups = 0;
  int query_ctas = 0, whole_ctas = 0;           // CTAs of the walk per group; the whole tiles' come first
  int whole_capacity = 0, packed_capacity = 0;  // key blocks a whole / a packed query CTA may need
  std::int32_t* query_blocks = nullptr;         // 4 words a query CTA
  std::int32_t* block_first = nullptr;          // [groups * query_ctas]
  std::int32_t* block_counts = nullptr;         // [groups * query_ctas]
  std::int32_t* blocks = nullptr;               // 4 words a block, block_capacity() blocks

  std::int64_t blocks_per_group() const {
    return std::int64_t{whole_ctas} * whole_capacity + std::int64_t{query_ctas - whole_ctas} * packed_capacity;
  }
  std::int64_t block_capacity() const { return groups * blocks_per_group(); }
};

// Sizes for the lists above (pointers left null). A packed query CTA walks the union of up to four
// tiles' lists, at most min(4 x max_list, tiles) key tiles.
inline SegmentedLists plan_segmented_lists(const std::vector<std::int32_t>& tile_rows, std::int64_t groups,
                                           int max_list) {
  SegmentedLists s;
  s.tiles = static_cast<int>(tile_rows.size());
  s.groups = groups;
  s.whole_ctas = whole_tile_count(tile_rows.data(), s.tiles);
  int segments = 0;
  for (const std::int32_t v : tile_rows) segments += tile_segments(v);
  s.query_ctas = s.whole_ctas + (segments + kSegmentsPerBlock - 1) / kSegmentsPerBlock;
  s.whole_capacity = max_list;
  s.packed_capacity = kSegmentsPerBlock * max_list < s.tiles ? kSegmentsPerBlock * max_list : s.tiles;
  return s;
}

}  // namespace diffattn
