#pragma once
// RAINFUSION_ATTN's sparse pass on CUDA tensors (sm_90). The GPU copies the sequence into padded
// tile order (kernels/sparse/rainfusion_tiles.h), takes the tiles' mean Q and K and their block
// scores, and each sampled video query's attention mass per key tile (float32); these come to the
// host, where the plan shared with the CPU path (kernels/sparse/rainfusion_plan.h) recognises each
// head's pattern and lists its tiles; the lists go up from page-locked memory and run through the
// 128 x 128 tiling of FLASH_ATTN's block-sparse Hopper kernel (one tile per RainFusion tile), and
// the valid rows go back into the call's token order. The plan is the CPU path's up to the float32
// scores: the same patterns, and the same tiles but where two block scores are within float32's
// rounding of each other.

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/sparse/rainfusion_plan.h"

namespace diffattn {

// `problem` has passed the layer's checks and lives on a CUDA device; the preconditions and
// refusals are run_rainfusion_cpu's, and besides: float16 or bfloat16, head sizes 64 and 128 with
// Dv == D, a positive softmax scale, an sm_90 device, and a stream that is not being captured (the
// lists are built on the host between GPU steps). Device work runs on `stream`, which this call
// synchronises once, after the scores' copy to the host; the fine pass and its lists' upload are
// left running on it. Nothing is written to out unless the call succeeds. In a build without CUDA
// this returns kUnavailable.
Status run_rainfusion_cuda(const AttentionProblem& problem, const RainFusionParams& params, void* stream,
                           RainFusionPlan* plan = nullptr);

}  // namespace diffattn
