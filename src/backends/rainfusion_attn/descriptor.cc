#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "backends/rainfusion_attn/rainfusion_backend.h"
#include "kernels/cuda/flash/flash_config.h"
#include "registry/builtin_registration.h"

namespace diffattn {
namespace {

const char kNoCudaKernels[] =
    "RAINFUSION_ATTN's CUDA path runs its fine pass on diffattn's block-sparse kernels, which this build does "
    "not hold for this GPU. Run it on CPU tensors, or select FLASH_ATTN or TORCH_SDPA instead.";

// The CUDA path's kernels are half precision, at the block-sparse kernels' head sizes with
// equal query and value head sizes; the CPU path takes every capability.
std::optional<std::string> check_cuda_half_precision(const ProblemShape& problem) {
  if (problem.device != DeviceKind::kCuda || problem.dtype == DType::kFloat16 || problem.dtype == DType::kBFloat16)
    return std::nullopt;
  return "dtype " + std::string(dtype_name(problem.dtype)) +
         " is not supported on CUDA tensors (float16 and bfloat16 are; float32 runs on CPU tensors)";
}

std::optional<std::string> check_cuda_head_size(const ProblemShape& problem) {
  if (problem.device != DeviceKind::kCuda || flash::is_block_sparse_head_size(static_cast<int>(problem.head_size)))
    return std::nullopt;
  return "head_size " + std::to_string(problem.head_size) + " is not supported on CUDA tensors (supported: " +
         flash::block_sparse_head_sizes_text() + "; the others run on CPU tensors)";
}

std::optional<std::string> check_cuda_value_head_size(const ProblemShape& problem) {
  if (problem.device != DeviceKind::kCuda || problem.head_size_v == problem.head_size) return std::nullopt;
  return "on CUDA tensors the value head size must equal the query head size (got " +
         std::to_string(problem.head_size_v) + " and " + std::to_string(problem.head_size) + ")";
}

}  // namespace

void register_rainfusion_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "RAINFUSION_ATTN";
  d.summary = "training-free block-sparse video attention driven by the block_sparse block";
  d.caps = rainfusion_attn_capabilities();
  d.cuda.needs = {need(PlatformFact::kArchitecture, "no RAINFUSION_ATTN kernel for {sm}")
                      .on({{80, 90}})
                      .when_explicit("does not provide a kernel for {sm} (RAINFUSION_ATTN's CUDA path is built for "
                                     "sm_80 to sm_90). Run it on CPU tensors, or select {suggest} instead.")};
  d.kernels = {{DeviceKind::kCpu, "frame patches, per-head pattern from sampled scores, block-sparse fine pass"},
               {DeviceKind::kCuda,
                "sm_80..sm_90: tile and sampled scores, head patterns and masks on the GPU, block-sparse fine pass "
                "(Hopper kernel on sm_90a, mma.sync walk on sm_80..sm_89)"}};
  // The CPU implementation is always built; the CUDA path needs FLASH_ATTN's kernels, which the
  // platform reports (the architecture need above keeps it to sm_80..sm_90).
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.kind == PlatformKind::kCpu || platform.features.flash_attn) return std::nullopt;
    return kNoCudaKernels;
  };
  d.extra_problem_reasons = [](const ProblemShape& problem) {
    std::vector<std::string> reasons;
    for (auto check : {check_cuda_half_precision, check_cuda_head_size, check_cuda_value_head_size})
      if (auto reason = check(problem)) reasons.push_back(*std::move(reason));
    return reasons;
  };
  d.validate_options = validate_rainfusion_attn_options;
  d.create = create_rainfusion_attn_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
