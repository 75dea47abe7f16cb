#pragma once
// RAINFUSION_ATTN's sparse pass on the CPU. The sequence is copied into padded tile order
// (kernels/sparse/rainfusion_tiles.h); block-mean representative tokens of Q and K per tile give
// block scores (float64), and the exact scores of a few sampled video queries their attention mass
// per key tile; from these the plan (kernels/sparse/rainfusion_plan.h, shared with the GPU path)
// recognises each head's pattern and lists every query tile's key tiles; the lists run through the
// block-sparse CPU kernel (run_block_sparse_cpu).

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/sparse/rainfusion_plan.h"

namespace diffattn {

// `problem` has passed the layer's checks, lives on the CPU and carries its video geometry; it has
// no mask, cu_seqlens, causal flag or lse. Nothing is written to out unless the call succeeds.
Status run_rainfusion_cpu(const AttentionProblem& problem, const RainFusionParams& params,
                          RainFusionPlan* plan = nullptr);

}  // namespace diffattn
