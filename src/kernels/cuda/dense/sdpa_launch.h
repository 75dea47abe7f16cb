#pragma once
// Internal launch interface of the TORCH_SDPA CUDA kernels. FLASH_ATTN's Ampere/Ada path calls
// the same launchers, so this header stays free of CUDA types (streams are cudaStream_t as void*).

#include <string>
#include <vector>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/cuda/dense/sdpa_params.h"

namespace diffattn::cuda {

// Kernel parameters for a problem that passed validate_problem and lives on a CUDA device.
Result<SdpaParams> make_sdpa_params(const AttentionProblem& problem);

// Why the tensor-core kernel cannot run `p` (empty: it can). Each reason names the rule.
std::vector<std::string> mma_path_reasons(const SdpaParams& p);

// The tensor-core kernel; fails with kUnsupported (and the reasons) when mma_path_reasons is not empty.
Status launch_sdpa_mma(const SdpaParams& p, void* stream);
// The SIMT kernel: any dtype of the three, head sizes up to 512, any strides, any scale.
Status launch_sdpa_generic(const SdpaParams& p, void* stream);
// The tensor-core kernel when it can run `p`, otherwise the SIMT kernel.
Status launch_sdpa(const SdpaParams& p, void* stream);

// The block-sparse walk of the tensor-core kernel over the lists in p.bs_* (sdpa_params.h), whose
// query and key tiles hold `list_tile` rows: head sizes kListedHeadDims (Dv = D), float16 and
// bfloat16, not causal, masked or packed. The lists are not checked (the caller has).
Status launch_sdpa_mma_block_sparse(const SdpaParams& p, int list_tile, void* stream);

}  // namespace diffattn::cuda
