#pragma once
// RAINFUSION_ATTN's plan on the GPU, from the float32 block scores and sampled masses of
// rainfusion_kernels.cuh: the same head patterns and the same block lists that build_rainfusion_plan
// (kernels/sparse/rainfusion_plan.h) builds on the host from those scores, entry for entry, so that
// nothing comes to the host between the scores and the fine pass.
//
// One warp selects one row: a video query tile's video key tiles under one pattern
// (rain_select_tiles' order: the sink, every candidate nearer than the distance at which the budget
// runs out, then the candidates at that distance by higher score, lower index first). The score
// ranking is warp_rank_cut's radix select (kernels/cuda/sparse/warp_rank_cut.cuh); the kept tiles
// come out in ascending order by ballots.
// Scores that are not numbers rank above every number (NaN inputs give NaN outputs, as dense
// attention's do); the lists stay full.

#include <cstdint>

#include "kernels/cuda/sparse/warp_rank_cut.cuh"
#include "kernels/sparse/rainfusion_list_shape.h"
#include "kernels/sparse/rainfusion_tile_map.h"

namespace diffattn::rainfusion {

using sparse::order_key;

// RainPattern's values (kernels/sparse/rainfusion_mask.h), as the device code reads them.
inline constexpr int kSpatial = 0, kTemporal = 1, kTextural = 2, kPatternCount = 3;

inline constexpr int kPlanThreads = 256;
inline constexpr int kPlanWarps = kPlanThreads / 32;

// What a row's selection reads of the tiling; tile counts fit int32 (the lists' offsets do).
struct SelectGeometry {
  int video = 0, frames = 0, patches_h = 0, patches_w = 0;
  int sink = 0;  // the first frame's tiles
  int more = 0;  // video key tiles kept past the sink: min(keep, video) - sink (none where <= 0)

  __device__ __forceinline__ int per_frame() const { return patches_h * patches_w; }

  // The distance that orders candidate `key` for `query` under `pattern`: frames apart (spatial),
  // patch positions apart, the larger of rows and columns (temporal), none (textural).
  __device__ __forceinline__ int distance(int pattern, int query, int key) const {
    if (pattern == kSpatial) return abs(key / per_frame() - query / per_frame());
    if (pattern == kTemporal) {
      const int q = query % per_frame(), k = key % per_frame();
      return max(abs(k / patches_w - q / patches_w), abs(k % patches_w - q % patches_w));
    }
    return 0;
  }

  // How many candidates (video tiles past the sink) lie at distance d from `query`.
  __device__ __forceinline__ int candidates_at(int pattern, int query, int d) const {
    if (pattern == kSpatial) {
      const int frame = query / per_frame();
      const int below = frame - d >= 1 ? 1 : 0, above = d > 0 && frame + d < frames ? 1 : 0;
      return (below + above) * per_frame();
    }
    if (pattern == kTemporal) {
      const int row = query % per_frame() / patches_w, col = query % patches_w;
      const auto within = [&](int r) {
        if (r < 0) return 0;
        const int rows = min(row + r, patches_h - 1) - max(row - r, 0) + 1;
        return rows * (min(col + r, patches_w - 1) - max(col - r, 0) + 1);
      };
      return (within(d) - within(d - 1)) * (frames - 1);
    }
    return d == 0 ? video - sink : 0;
  }
};

// A row's selection: candidates nearer than `boundary` are kept; at it, all of them (take_all) or
// those whose key is above `threshold` and the first `ties` (by index) whose key equals it.
struct WarpSelection {
  int boundary = -1;
  bool take_all = true;
  unsigned threshold = 0;
  int ties = 0;
};

// Run by a whole warp; `hist` is the warp's 256 words of shared memory.
__device__ __forceinline__ WarpSelection warp_select(const SelectGeometry& g, int pattern, int query,
                                                     const float* scores, unsigned* hist) {
  WarpSelection s;
  if (g.more <= 0) return s;  // the sink alone
  int d = 0, nearer = 0;
  while (nearer + g.candidates_at(pattern, query, d) < g.more) nearer += g.candidates_at(pattern, query, d++);
  s.boundary = d;
  int remaining = g.more - nearer;  // >= 1: the rank of the threshold among the candidates at d
  s.take_all = remaining == g.candidates_at(pattern, query, d);
  if (s.take_all) return s;

  const sparse::RankCut cut = sparse::warp_rank_cut(
      g.video, remaining, [&](int j) { return j >= g.sink && g.distance(pattern, query, j) == d; },
      [&](int j) { return order_key(scores[j]); }, hist);
  s.threshold = cut.threshold;
  s.ties = cut.ties;
  return s;
}

// The row's kept tiles in ascending order, 32 at a time: visit(base, members, position, tile) on
// every lane, `members` the chunk's ballot of kept tiles (bit i: tile base + i) and `position` the
// lane's place in the row (-1 where its tile is not kept).
template <typename Visit>
__device__ __forceinline__ void warp_emit(const SelectGeometry& g, int pattern, int query, const float* scores,
                                          const WarpSelection& s, Visit visit) {
  const int lane = threadIdx.x % 32;
  const unsigned lower = (1u << lane) - 1;
  int emitted = 0, ties_seen = 0;
  for (int base = 0; base < g.video; base += 32) {
    const int j = base + lane;
    bool member = false, tie = false;
    if (j < g.sink) {
      member = true;
    } else if (j < g.video) {
      const int d = g.distance(pattern, query, j);
      if (d < s.boundary) {
        member = true;
      } else if (d == s.boundary) {
        if (s.take_all) {
          member = true;
        } else {
          const unsigned key = order_key(scores[j]);
          member = key > s.threshold;
          tie = key == s.threshold;
        }
      }
    }
    const unsigned ties = __ballot_sync(0xffffffffu, tie);
    if (tie && ties_seen + __popc(ties & lower) < s.ties) member = true;
    ties_seen += __popc(ties);
    const unsigned members = __ballot_sync(0xffffffffu, member);
    visit(base, members, member ? emitted + __popc(members & lower) : -1, j);
    emitted += __popc(members);
  }
}

// Each tile's valid rows and each sampled query's padded slot, from the map.
__global__ void tile_tables(RainTileMap map, int samples, std::int32_t* valid, std::int32_t* sample_slots) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < map.tiles()) valid[i] = map.valid(i);
  if (i < samples) sample_slots[i] = static_cast<std::int32_t>(map.slot_of(map.sampled_token(i, samples)));
}

// held[(bh * samples + s) * 3 + p]: the mass of sampled query s of head bh that pattern p's mask
// of its tile holds, summed in float64 in ascending tile order (as the host plan sums it). One warp
// per entry.
__global__ void __launch_bounds__(kPlanThreads)
    sampled_pattern_mass(SelectGeometry g, const float* scores, const float* mass, const std::int32_t* sample_slots,
                         int samples, std::int64_t entries, double* held) {
  __shared__ unsigned hist[kPlanWarps][256];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t entry = static_cast<std::int64_t>(blockIdx.x) * kPlanWarps + warp;
  if (entry >= entries) return;
  const int pattern = static_cast<int>(entry % kPatternCount);
  const std::int64_t row = entry / kPatternCount, bh = row / samples;
  const int query = sample_slots[row % samples] / static_cast<int>(kRainTileTokens);
  const float* row_scores = scores + (bh * g.video + query) * g.video;
  const float* row_mass = mass + row * g.video;
  const WarpSelection s = warp_select(g, pattern, query, row_scores, hist[warp]);
  double sum = 0.0;
  warp_emit(g, pattern, query, row_scores, s, [&](int base, unsigned members, int, int) {
    if (lane == 0)
      for (unsigned m = members; m != 0; m &= m - 1) sum += static_cast<double>(row_mass[base + __ffs(m) - 1]);
  });
  if (lane == 0) held[entry] = sum;
}

// Each head's pattern from its held masses: the first pattern within 1 % of the most held
// (recognise_head's rule, in its arithmetic). captured[bh * 3 + p]: pattern p's mean held mass.
__global__ void choose_patterns(const double* held, int samples, std::int64_t heads, std::int32_t* patterns,
                                double* captured) {
  const std::int64_t bh = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (bh >= heads) return;
  double c[kPatternCount] = {0.0, 0.0, 0.0};
  for (int s = 0; s < samples; ++s)
    for (int p = 0; p < kPatternCount; ++p)
      c[p] += held[(bh * samples + s) * kPatternCount + p] / static_cast<double>(samples);
  const double most = fmax(c[0], fmax(c[1], c[2]));
  int chosen = 0;
  while (chosen < kPatternCount - 1 && c[chosen] < 0.99 * most) ++chosen;
  patterns[bh] = chosen;
  for (int p = 0; p < kPatternCount; ++p) captured[bh * kPatternCount + p] = c[p];
}

// offsets[r] for r in [0, rows]: where row r of the lists starts.
__global__ void list_offsets(RainListShape shape, std::int64_t rows, std::int32_t* offsets) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r <= rows) offsets[r] = static_cast<std::int32_t>(shape.offset(r));
}

// Row r = bh * tiles + t of the lists, one warp each: a video query tile's kept video tiles under
// its head's pattern, then every text tile; a text query tile's every tile.
__global__ void __launch_bounds__(kPlanThreads)
    list_tiles(SelectGeometry g, RainListShape shape, const float* scores, const std::int32_t* patterns,
               std::int64_t rows, std::int32_t* indices) {
  __shared__ unsigned hist[kPlanWarps][256];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kPlanWarps + warp;
  if (row >= rows) return;
  const std::int64_t tiles = shape.tiles(), bh = row / tiles;
  const int t = static_cast<int>(row % tiles);
  std::int32_t* out = indices + shape.offset(row);
  if (t >= g.video) {
    for (int j = lane; j < tiles; j += 32) out[j] = j;
    return;
  }
  const int pattern = patterns[bh];
  const float* row_scores = scores + (bh * g.video + t) * g.video;
  const WarpSelection s = warp_select(g, pattern, t, row_scores, hist[warp]);
  warp_emit(g, pattern, t, row_scores, s, [&](int, unsigned, int position, int tile) {
    if (position >= 0) out[position] = tile;
  });
  for (int k = lane; k < shape.text_tiles; k += 32) out[shape.listed + k] = g.video + k;
}

}  // namespace diffattn::rainfusion
