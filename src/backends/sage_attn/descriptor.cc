#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "backends/factories.h"
#include "backends/sage_attn/sage_options.h"
#include "registry/builtin_registration.h"

namespace diffattn {
namespace {

const char kNoCudaKernels[] =
    "SAGE_ATTN's CUDA kernels are not part of this diffattn build for this GPU; run it on CPU tensors, or select "
    "FLASH_ATTN or TORCH_SDPA instead.";

// The kernels read V with the score tile's layout, so the value head size must be the query's.
std::optional<std::string> check_value_head_size_matches(const ProblemShape& problem) {
  if (problem.head_size_v == problem.head_size) return std::nullopt;
  return "SAGE_ATTN needs the value head size to equal the query head size (got " +
         std::to_string(problem.head_size_v) + " and " + std::to_string(problem.head_size) + "); select TORCH_SDPA";
}

}  // namespace

void register_sage_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "SAGE_ATTN";
  d.summary = "diffattn 8-bit attention: INT8 Q*K^T with K smoothing, FP8 P*V (extra {\"pv\": \"fp16\"}: 16-bit P*V)";
  d.caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.head_sizes = {64, 128};
  d.caps.key_padding_mask = true;
  d.caps.dense_mask = false;
  d.caps.varlen = false;
  d.caps.lse = true;
  d.caps.quantized = true;
  d.head_size_reasons.explicit_reason =
      "head_size={head} is unsupported. Supported head sizes: {rule}. Select {suggest} instead.";
  d.head_size_reasons.default_reason = "head_size {head} is not supported (SAGE_ATTN supports {rule})";
  d.cuda.needs = {need(PlatformFact::kArchitecture, "no SAGE_ATTN kernel for {sm}")
                      .on({{80, 90}})
                      .when_explicit("does not provide a kernel for {sm} (SAGE_ATTN's CUDA kernels are built for "
                                     "sm_80 to sm_90). Select {suggest} instead.")};
  d.kernels = {{DeviceKind::kCpu, "INT8 Q*K^T, FP8 or 16-bit P*V; the GPU kernels' arithmetic"},
               {DeviceKind::kCuda, "sm_90a (FP8 or 16-bit P*V); sm_80 PTX for sm_80-sm_89 (16-bit P*V) and compute_89 for sm_89 (FP8 P*V)"}};
  // The CPU implementation is always built; the CUDA kernels exist where the platform says so.
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.kind == PlatformKind::kCpu || platform.features.sage_attn) return std::nullopt;
    return kNoCudaKernels;
  };
  d.extra_problem_reasons = [](const ProblemShape& problem) {
    std::vector<std::string> reasons;
    if (auto reason = check_value_head_size_matches(problem)) reasons.push_back(*std::move(reason));
    return reasons;
  };
  d.validate_options = validate_sage_options;
  d.create = create_sage_attn_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
