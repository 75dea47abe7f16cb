#include "backends/cudnn_attn/cudnn_attn_checks.h"

#include <utility>

namespace diffattn::cudnn_attn {

Reason check_head_size_multiple_of_8(std::int64_t head_size) {
  if (head_size > 0 && head_size <= kMaxHeadSize && head_size % 8 == 0) return std::nullopt;
  return "CUDNN_ATTN was explicitly selected but head_size=" + std::to_string(head_size) +
         " is unsupported. Blackwell cuDNN FMHA requires head_dim divisible by 8 and no larger than 256. "
         "Select FLASHINFER_ATTN or TORCH_SDPA.";
}

Reason check_dtype_half_or_bf16(DType dtype) {
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) return std::nullopt;
  return "CUDNN_ATTN runs float16 and bfloat16 inputs, got " + std::string(dtype_name(dtype)) +
         "; convert the inputs or select TORCH_SDPA, which runs float32";
}

Reason check_kv_length_above_one(std::int64_t seqlen_kv) {
  if (seqlen_kv > 1) return std::nullopt;
  return "CUDNN_ATTN was explicitly selected but cuDNN FMHA does not support key/value sequence length " +
         std::to_string(seqlen_kv) + ". Select TORCH_SDPA or another backend for this shape.";
}

Reason check_cuda_device(const ProblemShape& shape) {
  if (shape.device == DeviceKind::kCuda) return std::nullopt;
  return "CUDNN_ATTN runs on CUDA tensors, got CPU tensors; select TORCH_SDPA for CPU tensors";
}

bool mask_is_key_padding(const AttentionProblem& problem) {
  if (!problem.mask) return false;
  const TensorView& mask = *problem.mask;
  return mask.ndim == 2 || (mask.ndim == 4 && mask.size(1) == 1 && mask.size(2) == 1);
}

Reason check_packed_offsets_fit_int32(const AttentionProblem& problem) {
  if (!problem.is_varlen()) return std::nullopt;
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  const std::pair<const TensorView*, const char*> views[] = {
      {&problem.q, "q"}, {&problem.k, "k"}, {&problem.v, "v"}, {&problem.out, "out"}};
  for (const auto& [view, name] : views) {
    if (view->size(1) * view->stride(1) < kLimit) continue;
    return std::string("CUDNN_ATTN gives cuDNN 32-bit offsets into packed batches, but ") + name + " " +
           view->shape_string() + " spans " + std::to_string(view->size(1) * view->stride(1)) +
           " elements; split the batch into calls of fewer tokens, or select FLASH_ATTN";
  }
  return std::nullopt;
}

std::vector<std::string> problem_reasons(const ProblemShape& shape) {
  std::vector<std::string> reasons;
  const auto add = [&](std::optional<std::string> r) {
    if (r) reasons.push_back(*std::move(r));
  };
  add(check_cuda_device(shape));
  add(check_dtype_half_or_bf16(shape.dtype));
  add(check_head_size_multiple_of_8(shape.head_size));
  if (shape.head_size_v != shape.head_size) add(check_head_size_multiple_of_8(shape.head_size_v));
  add(check_kv_length_above_one(shape.seqlen_kv));
  return reasons;
}

}  // namespace diffattn::cudnn_attn
