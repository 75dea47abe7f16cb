#pragma once
// FLASH_ATTN on CUDA views: the Hopper kernel (wgmma + TMA) on sm_90 and the mma.sync kernel on
// sm_80..sm_89.

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn::flash {

// `problem` has passed validate_problem. Checks everything FLASH_ATTN needs before it launches,
// so on error `out` and `lse` are untouched. In a build without CUDA this returns kUnavailable.
Status run_flash_attn_cuda(const AttentionProblem& problem, void* stream);

}  // namespace diffattn::flash
