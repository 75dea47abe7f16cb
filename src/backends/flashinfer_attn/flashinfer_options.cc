#include "backends/flashinfer_attn/flashinfer_options.h"

#include <string>

#include "registry/option_checks.h"

namespace diffattn {
namespace {

std::optional<FlashInferVariant> parse_variant(const std::string& name) {
  if (name == "auto") return FlashInferVariant::kAuto;
  if (name == "fa2") return FlashInferVariant::kFa2;
  if (name == "fa3") return FlashInferVariant::kFa3;
  if (name == "cute-dsl") return FlashInferVariant::kCuteDsl;
  if (name == "trtllm-gen") return FlashInferVariant::kTrtllmGen;
  return std::nullopt;
}

std::string platform_text(const PlatformInfo& platform) {
  return platform.kind == PlatformKind::kCuda ? platform.sm_string() : std::string("the CPU");
}

}  // namespace

Status validate_flashinfer_options(const AttentionSpec& spec) {
  DIFFATTN_RETURN_IF_ERROR(check_extra_keys(spec, "FLASHINFER_ATTN", {}));
  if (!spec.quant) return Status::Ok();
  const AttnQuantSpec& q = *spec.quant;
  if (q.dtype_qk)
    DIFFATTN_RETURN_IF_ERROR(check_value_in("FLASHINFER_ATTN", "quant.dtype_qk", *q.dtype_qk, {"float16", "bfloat16"}));
  if (q.dtype_vo)
    DIFFATTN_RETURN_IF_ERROR(
        check_value_in("FLASHINFER_ATTN", "quant.dtype_vo", *q.dtype_vo, {"float16", "bfloat16", "fp8_e4m3"}));
  if (q.flashinfer_backend)
    DIFFATTN_RETURN_IF_ERROR(check_value_in("FLASHINFER_ATTN", "quant.flashinfer_backend", *q.flashinfer_backend,
                                            {"auto", "fa2", "fa3", "cute-dsl", "trtllm-gen"}));
  return Status::Ok();
}

FlashInferMode flashinfer_mode(const std::optional<AttentionSpec>& spec) {
  FlashInferMode mode;
  if (!spec || !spec->quant) return mode;
  const AttnQuantSpec& q = *spec->quant;
  if (q.flashinfer_backend) mode.variant = parse_variant(*q.flashinfer_backend).value_or(FlashInferVariant::kAuto);
  if (q.dtype_qk) mode.dtype_qk = parse_dtype(*q.dtype_qk);
  if (q.dtype_vo && *q.dtype_vo == "fp8_e4m3") {
    mode.fp8_v = true;
  } else if (q.dtype_vo) {
    mode.dtype_vo = parse_dtype(*q.dtype_vo);
  }
  return mode;
}

Status check_variant_on_platform(FlashInferVariant variant, const PlatformInfo& platform) {
  const bool cuda = platform.kind == PlatformKind::kCuda;
  const std::string here = platform_text(platform);
  switch (variant) {
    case FlashInferVariant::kAuto: return Status::Ok();
    case FlashInferVariant::kCuteDsl:
      if (cuda && platform.cc_major >= 10) return Status::Ok();
      return Unsupported("FLASHINFER_ATTN quant.flashinfer_backend='cute-dsl' runs FlashInfer's CuTe DSL kernels of "
                         "Blackwell GPUs (compute capability 10.0 or newer), not " + here +
                         ". Use 'fa2', 'fa3' or 'auto' (or leave flashinfer_backend unset).");
    case FlashInferVariant::kTrtllmGen:
      if (cuda && platform.cc_major == 10) return Status::Ok();
      return Unsupported("FLASHINFER_ATTN quant.flashinfer_backend='trtllm-gen' runs the trtllm-gen kernels of "
                         "datacenter Blackwell GPUs (SM100 / SM103), not " + here +
                         ". Use 'fa2', 'fa3' or 'auto' (or leave flashinfer_backend unset).");
    case FlashInferVariant::kFa3:
      if (!cuda || platform.cc_major == 9) return Status::Ok();
      return Unsupported("FLASHINFER_ATTN quant.flashinfer_backend='fa3' is the Hopper kernel (sm_90), not for " +
                         here + ". Use 'fa2' or 'auto'.");
    case FlashInferVariant::kFa2:
      if (!cuda || platform.cc_major >= 8) return Status::Ok();
      return Unsupported("FLASHINFER_ATTN quant.flashinfer_backend='fa2' needs compute capability 8.0 or newer, not " +
                         here + ". Select TORCH_SDPA instead.");
  }
  return Status::Ok();
}

}  // namespace diffattn
