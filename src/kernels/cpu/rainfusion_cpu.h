#pragma once
// RAINFUSION_ATTN's sparse pass on the CPU. The sequence is copied into padded tile order
// (kernels/sparse/rainfusion_tiles.h); block-mean representative tokens of Q and K per tile give
// block scores; each (batch, query head) is recognised as a spatial, temporal or textural head from
// the exact scores of a few sampled video queries (the pattern whose mask, at this budget, holds
// the most of their attention); that pattern's mask (kernels/sparse/rainfusion_mask.h) is every
// video query tile's list of video key tiles, text tiles are kept in every list and text queries
// attend to every tile; the lists run through the block-sparse CPU kernel (run_block_sparse_cpu).

#include <cstdint>
#include <vector>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/sparse/block_sparse_layout.h"
#include "kernels/sparse/rainfusion_mask.h"
#include "kernels/sparse/rainfusion_tiles.h"

namespace diffattn {

struct RainFusionParams {
  double sparsity = 0.8;    // share of video key tiles each video query tile drops, in [0, 1]
  int sampled_queries = 32;  // video queries per head whose exact scores recognise its pattern
};

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

// `problem` has passed the layer's checks, lives on the CPU and carries its video geometry; it has
// no mask, cu_seqlens, causal flag or lse. Nothing is written to out unless the call succeeds.
Status run_rainfusion_cpu(const AttentionProblem& problem, const RainFusionParams& params,
                          RainFusionPlan* plan = nullptr);

}  // namespace diffattn
