#pragma once
// RAINFUSION_ATTN's plan from its scores, shared by the CPU and CUDA paths so that both list the
// same tiles for the same scores: each (batch, query head) is recognised as a spatial, temporal or
// textural head from the attention mass of a few sampled video queries (the pattern whose mask, at
// this budget, holds the most of it), and that pattern's mask (kernels/sparse/rainfusion_mask.h) is
// every video query tile's list of video key tiles; text tiles are kept in every list and text
// queries attend to every tile. The paths differ only in where the scores come from: float64 on the
// CPU (kernels/cpu/rainfusion_cpu.cc), float32 from the GPU (kernels/cuda/sparse/rainfusion_cuda.cu).

#include <cstdint>
#include <functional>
#include <vector>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/sparse/block_sparse_layout.h"
#include "kernels/sparse/rainfusion_list_shape.h"
#include "kernels/sparse/rainfusion_mask.h"
#include "kernels/sparse/rainfusion_tiles.h"

namespace diffattn {

// The fine pass's arithmetic (block_sparse.precision): the inputs' precision with fp32 sums (kBf16),
// or SAGE_ATTN's over the same lists (kernels/sage/sage_quant.h): INT8 Q K^T with K smoothed, and
// P V in FP8 E4M3 with the two-level sum (kFp8) or in the inputs' 16-bit type (kMix).
enum class RainPrecision { kBf16, kFp8, kMix };

struct RainFusionParams {
  double sparsity = 0.8;    // share of video key tiles each video query tile drops, in [0, 1]
  int sampled_queries = 32;  // video queries per head whose exact scores recognise its pattern
  RainPrecision precision = RainPrecision::kBf16;
};

// "bf16", "fp8", "mix".
const char* rain_precision_name(RainPrecision precision);

// What a call chose, for tests, reports and the GPU path to compare with.
struct RainFusionPlan {
  RainTiles tiles;
  BlockSparseLayout layout;           // in padded tile order, query tiles = key tiles = tiles.count()
  std::vector<RainPattern> patterns;  // per batch entry and query head: [b * Hq + h]
  // Per pattern, the sampled attention mass its mask held, averaged over heads: [pattern][b * Hq + h].
  std::vector<std::vector<double>> captured;
  double video_density = 0.0;  // listed (video query tile, video key tile) pairs over all of them
  double density = 0.0;        // listed tile pairs over all, text included
};

// The refusals both paths make before anything runs: a call without its video geometry, with a
// mask, cu_seqlens, causal flag or lse, or with params out of range.
Status check_rainfusion_call(const AttentionProblem& problem, const RainFusionParams& params);

// The lists' shape at a budget of `keep` video key tiles (rain_keep_tiles), and the refusal where
// `heads_total` heads of it outgrow the int32 offsets.
RainListShape rain_list_shape(const RainTiles& tiles, std::int64_t keep);
Status check_rain_list_size(const RainListShape& shape, std::int64_t heads_total);

// Listed (video query tile, video key tile) pairs over all of them.
double rain_video_density(const RainListShape& shape);

// The padded slots of the sampled video queries: min(sampled, video tokens) of them, spread evenly
// over the video's tokens, the same for every head.
std::vector<std::int64_t> rain_sampled_slots(const RainTiles& tiles, const VideoGeometry& g, int sampled);

// Where the plan reads its scores; called from several threads at once. bh = b * Hq + h.
template <typename Score>
struct RainScoreSource {
  // The block scores (scale x mean(Q of the query tile) . mean(K of the key tile)) of video query
  // tiles [first, first + count) against every video key tile, [count, video tiles] row-major:
  // written into `buffer`, or pointing into storage the source owns.
  std::function<const Score*(std::int64_t bh, std::int64_t first, std::int64_t count, std::vector<Score>& buffer)>
      block_scores;
  // The attention mass of sampled query `sample` (rain_sampled_slots' entry, at padded `slot`) on
  // each video key tile, from its exact scores over every video key: video tiles entries summing to 1.
  std::function<void(std::int64_t bh, std::int64_t sample, std::int64_t slot, std::vector<double>& mass)>
      sampled_mass;
};

// Fills `plan`'s patterns, captured masses, layout (with tile_rows) and densities for `batch` x
// `heads_q` heads; plan.tiles holds the call's tiling (tile_sequence_for_rainfusion). Runs on the
// OpenMP threads. Fails, with `plan` partly filled, where the scores are not numbers (inputs holding
// inf or NaN) or the lists would outgrow int32 offsets.
template <typename Score>
Status build_rainfusion_plan(const VideoGeometry& g, const RainFusionParams& params, std::int64_t batch,
                             std::int64_t heads_q, const RainScoreSource<Score>& source, RainFusionPlan& plan);

extern template Status build_rainfusion_plan<double>(const VideoGeometry&, const RainFusionParams&, std::int64_t,
                                                     std::int64_t, const RainScoreSource<double>&, RainFusionPlan&);
extern template Status build_rainfusion_plan<float>(const VideoGeometry&, const RainFusionParams&, std::int64_t,
                                                    std::int64_t, const RainScoreSource<float>&, RainFusionPlan&);

}  // namespace diffattn
