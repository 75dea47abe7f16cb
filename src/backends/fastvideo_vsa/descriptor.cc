#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "backends/fastvideo_vsa/fastvideo_vsa_backend.h"
#include "registry/builtin_registration.h"

namespace diffattn {
namespace {

const char kNoCudaKernels[] =
    "FASTVIDEO_VSA's CUDA path runs its fine branch on diffattn's block-sparse kernels, which this build does "
    "not hold for this GPU. Run it on CPU tensors, or select TORCH_SDPA instead.";

// The CUDA path's kernels are half precision with equal query and value head sizes (the fine
// branch is the block-sparse kernel); the CPU path also takes float32 and Dv != D.
std::optional<std::string> check_cuda_half_precision(const ProblemShape& problem) {
  if (problem.device != DeviceKind::kCuda || problem.dtype == DType::kFloat16 || problem.dtype == DType::kBFloat16)
    return std::nullopt;
  return "dtype " + std::string(dtype_name(problem.dtype)) +
         " is not supported on CUDA tensors (float16 and bfloat16 are; float32 runs on CPU tensors)";
}

std::optional<std::string> check_cuda_value_head_size(const ProblemShape& problem) {
  if (problem.device != DeviceKind::kCuda || problem.head_size_v == problem.head_size) return std::nullopt;
  return "on CUDA tensors the value head size must equal the query head size (got " +
         std::to_string(problem.head_size_v) + " and " + std::to_string(problem.head_size) + ")";
}

}  // namespace

void register_fastvideo_vsa(Registry& registry) {
  BackendDescriptor d;
  d.name = "FASTVIDEO_VSA";
  d.summary = "video sparse attention: pooled coarse attention picks top-k cubes for fine attention";
  d.caps = fastvideo_vsa_capabilities();
  d.cuda.needs = {need(PlatformFact::kArchitecture, "no FASTVIDEO_VSA kernel for {sm}")
                      .on({{80, 90}})
                      .when_explicit("does not provide a kernel for {sm} (FASTVIDEO_VSA's CUDA path is built for "
                                     "sm_80 to sm_90). Select {suggest} instead.")};
  d.kernels = {{DeviceKind::kCpu, "4x4x4 cubes, coarse branch and top-k, block-sparse fine branch"},
               {DeviceKind::kCuda,
                "sm_80..sm_90: coarse branch and top-k, block-sparse fine branch (Hopper kernel on sm_90a, mma.sync "
                "walk on sm_80..sm_89)"}};
  // The CPU implementation is always built; the CUDA path needs FLASH_ATTN's kernels, which the
  // platform reports (the architecture need above keeps it to sm_80..sm_90).
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.kind == PlatformKind::kCpu || platform.features.flash_attn) return std::nullopt;
    return kNoCudaKernels;
  };
  d.extra_problem_reasons = [](const ProblemShape& problem) {
    std::vector<std::string> reasons;
    for (auto check : {check_cuda_half_precision, check_cuda_value_head_size})
      if (auto reason = check(problem)) reasons.push_back(*std::move(reason));
    return reasons;
  };
  d.validate_options = validate_fastvideo_vsa_options;
  d.create = create_fastvideo_vsa_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
