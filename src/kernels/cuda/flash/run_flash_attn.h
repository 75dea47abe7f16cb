#pragma once
// FLASH_ATTN on CUDA views: the Hopper kernel (wgmma + TMA) on sm_90 and the mma.sync kernel on
// sm_80..sm_89.

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn::flash {

// `problem` has passed validate_problem. Checks everything FLASH_ATTN needs before it launches,
// so on error `out` and `lse` are untouched. In a build without CUDA this returns kUnavailable.
Status run_flash_attn_cuda(const AttentionProblem& problem, void* stream);

// The sm_80..sm_89 (mma.sync) kernel on any device from sm_80 on, with the same checks. FLASH_ATTN
// dispatches to it on Ampere and Ada; calling it directly lets that kernel be checked on a newer GPU.
Status run_flash_attn_ampere_cuda(const AttentionProblem& problem, void* stream);

}  // namespace diffattn::flash
