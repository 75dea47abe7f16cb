#pragma once
// TORCH_SDPA on CUDA: the exact tiled kernel (fp32 accumulation) behind TORCH_SDPA for CUDA views.

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn {

// `problem` has passed validate_problem and lives on a CUDA device; `stream` is a cudaStream_t.
// In a build without CUDA this returns kUnavailable.
Status run_sdpa_cuda(const AttentionProblem& problem, void* stream);

}  // namespace diffattn
