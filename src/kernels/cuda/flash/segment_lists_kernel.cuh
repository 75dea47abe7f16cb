#pragma once
// Builds the segmented lists of the one-warpgroup walk (kernels/sparse/segmented_key_blocks.h) on
// the device: the query CTAs of the tiling (one warp), then for every (list group, query CTA) the
// key blocks of the union of its tiles' lists (one warp each, two passes over the union because
// the segmented blocks follow the whole ones). The host functions of segmented_key_blocks.h are the
// oracle: segment_query_tiles, query_block_union and segment_entries give the same words.

#include <cstdint>

#include "kernels/sparse/segmented_key_blocks.h"

namespace diffattn::flash {

inline constexpr int kSegmentWarps = 8;  // warps per block of the launches

// One entry of a sequence being segmented: kept entries are tiles with the warps that attend them.
struct WarpEntry {
  bool keep;
  std::int32_t tile;
  int members;
};

// Segments entries 0..n of `get` into out (4 words a block) with the warp's 32 lanes; returns the
// number of blocks (on every lane).
template <class Get>
__device__ int warp_segment(int n, const Get& get, const std::int32_t* tile_rows, std::int32_t* out, int lane) {
  int wholes = 0;
  for (int base = 0; base < n; base += 32) {
    bool whole = false;
    if (base + lane < n) {
      const WarpEntry e = get(base + lane);
      whole = e.keep && tile_is_whole(tile_rows[e.tile]);
    }
    wholes += __popc(__ballot_sync(0xffffffffu, whole));
  }
  const unsigned below = (1u << lane) - 1u;
  int whole_at = 0, segment_at = 0;
  for (int base = 0; base < n; base += 32) {
    WarpEntry e{false, 0, 0};
    if (base + lane < n) e = get(base + lane);
    const int valid = e.keep ? tile_rows[e.tile] : 0;
    const bool whole = e.keep && tile_is_whole(valid);
    const int segs = e.keep ? tile_segments(valid) : 0;
    const unsigned whole_mask = __ballot_sync(0xffffffffu, whole);
    int inclusive = segs;  // segments over lanes 0..lane
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += v;
    }
    const std::int64_t row = std::int64_t{e.tile} * kSegmentTile;
    if (whole) {
      const int at = (whole_at + __popc(whole_mask & below)) * 4;
      out[at] = segment_word(row, valid, e.members);
      out[at + 1] = -1;
      out[at + 2] = -1;
      out[at + 3] = -1;
    }
    for (int s = 0; s < segs; ++s) {
      const int g = segment_at + inclusive - segs + s;  // this segment's place among the sequence's
      out[(wholes + g / kSegmentsPerBlock) * 4 + g % kSegmentsPerBlock] =
          segment_word(row + s * kSegmentRows, segment_rows(valid, s), e.members);
    }
    whole_at += __popc(whole_mask);
    segment_at += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  const int tail = segment_at % kSegmentsPerBlock;  // the last block's empty boxes
  if (tail != 0 && lane >= tail && lane < kSegmentsPerBlock)
    out[(wholes + segment_at / kSegmentsPerBlock) * 4 + lane] = -1;
  return wholes + (segment_at + kSegmentsPerBlock - 1) / kSegmentsPerBlock;
}

// The query CTAs over `tiles` tiles (segment_query_tiles), by one warp.
__global__ void segment_query_kernel(const std::int32_t* tile_rows, int tiles, std::int32_t* query_blocks) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (threadIdx.x >= 32) return;
  warp_segment(
      tiles, [](int i) { return WarpEntry{true, i, kAllMembers}; }, tile_rows, query_blocks, lane);
}

// Whether the ascending list[0..len) holds e.
__device__ __forceinline__ bool list_holds(const std::int32_t* list, int len, std::int32_t e) {
  int lo = 0, hi = len;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const std::int32_t v = __ldg(list + mid);
    if (v < e)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < len && __ldg(list + lo) == e;
}

struct SegmentListsParams {
  const std::int32_t* offsets;  // the lists (CSR); group g's list of tile t is row g * tiles + t
  const std::int32_t* indices;
  const std::int32_t* tile_rows;
  const std::int32_t* query_blocks;  // segment_query_kernel's
  std::int64_t groups;               // batch x query heads
  int tiles, query_ctas, whole_ctas;
  int whole_capacity, packed_capacity;  // blocks a whole / packed query CTA may need
  std::int32_t* block_first;            // out: [groups * query_ctas]
  std::int32_t* block_counts;           // out: [groups * query_ctas]
  std::int32_t* blocks;                 // out: 4 words a block
};

// The key blocks of (group, query CTA) pairs, one warp each (query_block_union, segment_entries).
__global__ void __launch_bounds__(kSegmentWarps * 32) segment_lists_kernel(const SegmentListsParams p) {
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * kSegmentWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (item >= p.groups * p.query_ctas) return;  // uniform per warp
  const std::int64_t g = item / p.query_ctas;
  const int x = static_cast<int>(item % p.query_ctas);
  const std::int64_t per_group = std::int64_t{p.whole_ctas} * p.whole_capacity +
                                 std::int64_t{p.query_ctas - p.whole_ctas} * p.packed_capacity;
  const std::int64_t first = g * per_group + (x < p.whole_ctas ? std::int64_t{x} * p.whole_capacity
                                                               : std::int64_t{p.whole_ctas} * p.whole_capacity +
                                                                     std::int64_t{x - p.whole_ctas} * p.packed_capacity);
  const std::int32_t words[4] = {p.query_blocks[4 * x], p.query_blocks[4 * x + 1], p.query_blocks[4 * x + 2],
                                 p.query_blocks[4 * x + 3]};
  std::int32_t tiles[4];
  int members[4];
  const int n = query_block_tiles(words, tiles, members);
  const std::int32_t* lists[4];
  int lens[4], starts[5];
  starts[0] = 0;
  for (int k = 0; k < 4; ++k) {
    const std::int64_t r = g * p.tiles + (k < n ? tiles[k] : 0);
    lists[k] = p.indices + p.offsets[r];
    lens[k] = k < n ? p.offsets[r + 1] - p.offsets[r] : 0;
    starts[k + 1] = starts[k] + lens[k];
  }
  // Entry i of the concatenated lists: kept unless an earlier tile lists it; attended by the warps
  // of every tile that lists it.
  auto get = [&](int i) {
    int k = 0;
    while (k + 1 < n && i >= starts[k + 1]) ++k;
    const std::int32_t e = __ldg(lists[k] + (i - starts[k]));
    bool keep = true;
    for (int j = 0; j < k; ++j) keep = keep && !list_holds(lists[j], lens[j], e);
    int m = members[k];
    if (keep)
      for (int j = k + 1; j < n; ++j) m |= list_holds(lists[j], lens[j], e) ? members[j] : 0;
    return WarpEntry{keep, e, m};
  };
  const int count = warp_segment(starts[n], get, p.tile_rows, p.blocks + 4 * first, lane);
  if (lane == 0) {
    p.block_first[item] = static_cast<std::int32_t>(first);
    p.block_counts[item] = count;
  }
}

}  // namespace diffattn::flash
