#pragma once
// Merging partial attention outputs computed over disjoint key sets (ring attention's blocks) by
// their log-sum-exp: the merged output is the LSE-weighted mean of the partials, the merged LSE
// is log(exp(lse_a) + exp(lse_b)). A partial with LSE -inf (no keys kept) leaves the other as is.

#include <cstdint>

#include "diffattn/dtype.h"
#include "diffattn/status.h"

namespace diffattn::merge {

// acc_out and part_out are contiguous [B, S, H, Dv]; acc_lse and part_lse are float32 [B, H, S]
// (the layout of AttentionProblem::lse). acc_* is float32 and updated in place; part_out may be
// float32, float16 or bfloat16.
struct PartialMergeParams {
  float* acc_out = nullptr;
  float* acc_lse = nullptr;
  const void* part_out = nullptr;
  DType part_dtype = DType::kFloat32;
  const float* part_lse = nullptr;
  std::int64_t batch = 0, seqlen = 0, heads = 0, head_size_v = 0;
};

// Checks the sizes and dtypes (shared by both implementations).
Status check_partial_merge(const PartialMergeParams& p);

// Host memory.
Status merge_partial_cpu(const PartialMergeParams& p);
// Device memory, on `stream` (a cudaStream_t). kUnavailable in a build without CUDA.
Status merge_partial_cuda(const PartialMergeParams& p, void* stream);

// out[i] = acc[i] converted to `dtype` (float32, float16, bfloat16), `count` contiguous elements.
Status store_merged_cpu(const float* acc, void* out, DType dtype, std::int64_t count);
Status store_merged_cuda(const float* acc, void* out, DType dtype, std::int64_t count, void* stream);

}  // namespace diffattn::merge
