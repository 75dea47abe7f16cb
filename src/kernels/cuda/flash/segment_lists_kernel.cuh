#pragma once
// Builds the segmented key blocks (kernels/sparse/segmented_key_blocks.h) of every 64 x 64 key list
// on the device: one warp per list, two passes over it (the whole tiles are counted first, because
// the segmented blocks follow them). Row r's blocks are written at blocks[offsets[r] ..), at most
// as many as its list has entries, and their number at counts[r]; segment_key_list is the oracle.

#include <cstdint>

#include "kernels/sparse/segmented_key_blocks.h"

namespace diffattn::flash {

inline constexpr int kSegmentWarps = 8;  // lists per block of the launch

__global__ void __launch_bounds__(kSegmentWarps * 32)
    segment_lists_kernel(const std::int32_t* offsets, const std::int32_t* indices, const std::int32_t* tile_rows,
                         std::int64_t rows, SegmentedBlock* blocks, std::int32_t* counts) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kSegmentWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (r >= rows) return;  // uniform per warp
  const std::int32_t first = offsets[r];
  const int len = offsets[r + 1] - first;
  const std::int32_t* list = indices + first;
  std::int32_t* out = reinterpret_cast<std::int32_t*>(blocks + first);
  int wholes = 0;
  for (int base = 0; base < len; base += 32) {
    const int i = base + lane;
    wholes += __popc(__ballot_sync(0xffffffffu, i < len && tile_is_whole(tile_rows[list[i]])));
  }
  const unsigned below = (1u << lane) - 1u;
  int whole_at = 0, segment_at = 0;
  for (int base = 0; base < len; base += 32) {
    const int i = base + lane;
    const std::int32_t tile = i < len ? list[i] : 0;
    const int valid = i < len ? tile_rows[tile] : 0;
    const bool whole = i < len && tile_is_whole(valid);
    const int segs = i < len ? tile_segments(valid) : 0;
    const unsigned whole_mask = __ballot_sync(0xffffffffu, whole);
    // Inclusive sum of the segments over lanes 0..lane.
    int inclusive = segs;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += v;
    }
    const std::int64_t row = std::int64_t{tile} * kSegmentTile;
    if (whole) {
      const int at = (whole_at + __popc(whole_mask & below)) * 4;
      out[at] = segment_word(row, valid);
      out[at + 1] = -1;
      out[at + 2] = -1;
      out[at + 3] = -1;
    }
    for (int s = 0; s < segs; ++s) {
      const int g = segment_at + inclusive - segs + s;  // this segment's place among the list's
      const int rows_in = valid - s * kSegmentRows < kSegmentRows ? valid - s * kSegmentRows : kSegmentRows;
      out[(wholes + g / kSegmentsPerBlock) * 4 + g % kSegmentsPerBlock] = segment_word(row + s * kSegmentRows, rows_in);
    }
    whole_at += __popc(whole_mask);
    segment_at += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  // The last segmented block's empty boxes.
  const int tail = segment_at % kSegmentsPerBlock;
  if (tail != 0 && lane >= tail && lane < kSegmentsPerBlock)
    out[(wholes + segment_at / kSegmentsPerBlock) * 4 + lane] = -1;
  if (lane == 0) counts[r] = wholes + (segment_at + kSegmentsPerBlock - 1) / kSegmentsPerBlock;
}

}  // namespace diffattn::flash
