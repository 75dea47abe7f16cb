#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "backends/factories.h"
#include "backends/flashinfer_attn/flashinfer_attn_backend.h"
#include "backends/flashinfer_attn/flashinfer_options.h"
#include "registry/builtin_registration.h"

namespace diffattn {

Capabilities flashinfer_capabilities() {
  Capabilities caps;
  caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  caps.head_sizes = {64, 128, 256};
  caps.key_padding_mask = true;
  caps.dense_mask = true;
  caps.varlen = true;
  caps.lse = true;
  caps.option_blocks = {"quant"};
  return caps;
}

// FlashInfer takes either a custom mask or its causal flag (the seeds refuse both together).
std::vector<std::string> flashinfer_problem_reasons(const ProblemShape& problem) {
  std::vector<std::string> reasons;
  if (problem.causal && problem.mask != MaskKind::kNone) {
    reasons.push_back("causal=true together with an explicit mask is not supported; fold the causal cut into "
                      "the mask, or select TORCH_SDPA");
  }
  return reasons;
}

void register_flashinfer_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "FLASHINFER_ATTN";
  d.summary = "FlashInfer batch-prefill semantics (ragged batches, boolean masks, LSE) on diffattn's kernels; "
              "quant block for QK16/V8";
  d.caps = flashinfer_capabilities();
  d.cuda.needs = {
      need(PlatformFact::kFlashInfer, "FlashInfer is not available")
          .when_explicit("FlashInfer is unavailable on {device}. Use a build with FlashInfer or select a different "
                         "backend."),
      need(PlatformFact::kFlashInferPrefill, "the FlashInfer build lacks BatchPrefillWithRaggedKVCacheWrapper")
          .when_explicit("the FlashInfer build does not provide the ragged prefill kernels "
                         "(BatchPrefillWithRaggedKVCacheWrapper). Use a FlashInfer build that has them, or select "
                         "{suggest}.")};
  d.head_size_reasons.default_needs_known = true;
  d.kernels = {{DeviceKind::kCpu, "tiled, vectorised; QK16/V8: FP8 E4M3 V, per-channel scales"},
               {DeviceKind::kCuda,
                "FLASH_ATTN's: sm_90a with dense masks on its listed walk (empty key blocks skipped), sm_80 mma.sync; "
                "QK16/V8 on sm_90a (16-bit Q*K^T, FP8 P*V)",
                {{80, 90}}}};
  // The CPU kernel is part of every build. On CUDA the kernels are FLASH_ATTN's: the probe reports
  // them as features.flashinfer (kDiffattnPrefillKernels) where those run; a described platform's
  // features declare them.
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.kind == PlatformKind::kCpu || !platform.features.flashinfer.empty()) return std::nullopt;
    return kFlashInferNoCudaKernels;
  };
  d.extra_problem_reasons = flashinfer_problem_reasons;
  d.validate_options = validate_flashinfer_options;
  d.create = create_flashinfer_attn_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
