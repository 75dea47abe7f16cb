#pragma once
// RAINFUSION_ATTN's sparse pass on CUDA tensors (sm_80 to sm_90), all on the caller's stream with no host
// copy and no wait: the GPU copies the sequence into padded tile order (RainTileMap,
// kernels/sparse/rainfusion_tile_map.h), takes the tiles' mean Q and K and their block scores and
// each sampled video query's attention mass per key tile (float32), recognises each head's pattern
// and lists its tiles (kernels/cuda/sparse/rainfusion_plan_kernels.cuh: the plan the CPU path's
// build_rainfusion_plan makes from the same float32 scores), runs the lists through the 128 x 128
// tiling of FLASH_ATTN's block-sparse kernel (one tile per RainFusion tile; Hopper's on sm_90, the
// mma.sync walk on sm_80..sm_89), and copies the
// valid rows back into the call's token order. Against the CPU path's float64 scores: the same
// patterns, and the same tiles but where two block scores are within float32's rounding.

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/sparse/rainfusion_plan.h"

namespace diffattn {

// `problem` has passed the layer's checks and lives on a CUDA device; the preconditions and
// refusals are run_rainfusion_cpu's, and besides: float16 or bfloat16, head sizes 64 and 128 with
// Dv == D, a positive softmax scale and a device with a block-sparse kernel (`kernel`: the device's,
// or the mma.sync walk, which lets that kernel be checked on a newer GPU). Inputs holding inf or NaN are not refused
// (that would need a wait): their rows come out NaN, as dense attention's do. The work is left
// running on `stream` (capturable in a CUDA graph) unless `plan` is given: then the GPU's plan is
// read back into it, which waits for the stream. Nothing is written to out unless the call
// succeeds. In a build without CUDA this returns kUnavailable.
Status run_rainfusion_cuda(const AttentionProblem& problem, const RainFusionParams& params, void* stream,
                           RainFusionPlan* plan = nullptr,
                           flash::BlockSparseKernel kernel = flash::BlockSparseKernel::kForDevice);

}  // namespace diffattn
