#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "registry/builtin_registration.h"
#include "registry/option_checks.h"
#include "registry/unavailable_backend.h"

namespace diffattn {
namespace {

const char kNotBuilt[] =
    "FLASHINFER_ATTN runs FlashInfer's prefill kernels, which are not part of this diffattn build. "
    "Select CUDNN_ATTN, FLASH_ATTN or TORCH_SDPA instead.";

Status validate_flashinfer_options(const AttentionSpec& spec) {
  DIFFATTN_RETURN_IF_ERROR(check_extra_keys(spec, "FLASHINFER_ATTN", {}));
  if (!spec.quant) return Status::Ok();
  if (spec.quant->dtype_qk) {
    DIFFATTN_RETURN_IF_ERROR(
        check_value_in("FLASHINFER_ATTN", "quant.dtype_qk", *spec.quant->dtype_qk, {"float16", "bfloat16"}));
  }
  if (spec.quant->dtype_vo) {
    DIFFATTN_RETURN_IF_ERROR(check_value_in("FLASHINFER_ATTN", "quant.dtype_vo", *spec.quant->dtype_vo,
                                            {"float16", "bfloat16", "fp8_e4m3"}));
  }
  return Status::Ok();
}

}  // namespace

void register_flashinfer_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "FLASHINFER_ATTN";
  d.summary = "FlashInfer batch-prefill kernels; quant block for QK16/V8";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.head_sizes = {64, 128, 256};
  d.caps.varlen = true;
  d.caps.option_blocks = {"quant"};
  d.cuda.needs = {
      need(PlatformFact::kFlashInfer, "FlashInfer is not available")
          .when_explicit("FlashInfer is unavailable on {device}. Use a build with FlashInfer or select a different "
                         "backend."),
      need(PlatformFact::kFlashInferPrefill, "the FlashInfer build lacks BatchPrefillWithRaggedKVCacheWrapper")
          .when_explicit("the FlashInfer build does not provide the ragged prefill kernels "
                         "(BatchPrefillWithRaggedKVCacheWrapper). Use a FlashInfer build that has them, or select "
                         "{suggest}.")};
  d.head_size_reasons.default_needs_known = true;
  // A platform whose features list FlashInfer declares a build that holds it.
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (!platform.features.flashinfer.empty()) return std::nullopt;
    return kNotBuilt;
  };
  d.extra_problem_reasons = [](const ProblemShape& problem) {
    std::vector<std::string> reasons;
    if (problem.causal && problem.mask != MaskKind::kNone) {
      reasons.push_back("causal=true together with an explicit mask is not supported");
    }
    return reasons;
  };
  d.validate_options = validate_flashinfer_options;
  d.create = unavailable_factory(kNotBuilt);
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
