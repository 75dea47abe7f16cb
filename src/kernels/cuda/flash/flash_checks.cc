#include "kernels/cuda/flash/flash_checks.h"

#include "common/strings.h"
#include "kernels/cuda/flash/flash_config.h"

namespace diffattn::flash {

Reason check_head_size_compiled(const ProblemShape& shape) {
  if (shape.head_size <= 0 || is_supported_head_size(static_cast<int>(shape.head_size))) return std::nullopt;
  return "FLASH_ATTN has no kernel for head size " + std::to_string(shape.head_size) + " (compiled: " +
         supported_head_sizes_text() + "); select TORCH_SDPA for this head size";
}

Reason check_value_head_size_matches(const ProblemShape& shape) {
  if (shape.head_size_v == 0 || shape.head_size_v == shape.head_size) return std::nullopt;
  return "FLASH_ATTN needs the value head size to equal the query/key head size, got D=" +
         std::to_string(shape.head_size) + " and Dv=" + std::to_string(shape.head_size_v) + "; select TORCH_SDPA";
}

Reason check_half_precision(const ProblemShape& shape) {
  if (shape.dtype == DType::kFloat16 || shape.dtype == DType::kBFloat16) return std::nullopt;
  return "FLASH_ATTN runs float16 and bfloat16 only, got " + std::string(dtype_name(shape.dtype)) +
         "; cast q/k/v to bfloat16 or select TORCH_SDPA";
}

Reason check_no_dense_mask(const ProblemShape& shape) {
  if (shape.mask != MaskKind::kDense) return std::nullopt;
  return "FLASH_ATTN takes key-padding masks [B, Skv] and packed batches, not dense [B|1, H|1, Sq, Skv] masks; "
         "select FLASHINFER_ATTN or TORCH_SDPA for dense masks";
}

Reason check_has_keys(const ProblemShape& shape) {
  if (shape.seqlen_kv > 0 || shape.seqlen_q == 0) return std::nullopt;
  return "FLASH_ATTN needs at least one key (Skv is 0); select TORCH_SDPA for empty key sets";
}

std::vector<std::string> flash_shape_reasons(const ProblemShape& shape) {
  using Check = std::optional<std::string> (*)(const ProblemShape&);
  static constexpr Check kChecks[] = {check_head_size_compiled, check_value_head_size_matches, check_half_precision,
                                      check_no_dense_mask, check_has_keys};
  std::vector<std::string> reasons;
  for (Check check : kChecks) {
    if (auto reason = check(shape)) reasons.push_back(*std::move(reason));
  }
  return reasons;
}

std::optional<FlashKernel> flash_kernel_for_capability(int cc_major, int cc_minor) {
  const int capability = cc_major * 10 + cc_minor;
  for (const FlashKernelInfo& k : kKernels) {
    if (capability >= k.min_capability && capability <= k.max_capability) return k.kernel;
  }
  return std::nullopt;
}

std::string_view kernel_name(FlashKernel kernel) {
  switch (kernel) {
    case FlashKernel::kAmpere: return "ampere";
    case FlashKernel::kHopper: return "hopper";
  }
  return "unknown";
}

std::string kernels_text() {
  std::vector<std::string> parts;
  for (const FlashKernelInfo& k : kKernels) parts.push_back(std::string(k.target) + " " + k.description);
  return join_as_sentence(parts);
}

std::string architectures_text() {
  const auto sm = [](int capability) { return "sm_" + std::to_string(capability); };
  std::vector<std::string> parts;
  for (const FlashKernelInfo& k : kKernels) {
    parts.push_back(k.min_capability == k.max_capability ? sm(k.min_capability)
                                                          : sm(k.min_capability) + ".." + sm(k.max_capability));
  }
  return join_as_sentence(parts);
}

}  // namespace diffattn::flash
