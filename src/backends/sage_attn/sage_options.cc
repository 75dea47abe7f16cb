#include "backends/sage_attn/sage_options.h"

#include <string>

#include "registry/option_checks.h"

namespace diffattn {

Status validate_sage_options(const AttentionSpec& spec) {
  DIFFATTN_RETURN_IF_ERROR(check_extra_keys(spec, "SAGE_ATTN", {"pv"}));
  if (!spec.extra.contains("pv")) return Status::Ok();
  const nlohmann::json& pv = spec.extra.at("pv");
  if (!pv.is_string())
    return InvalidConfig("SAGE_ATTN extra.pv must be a string, \"fp8\" (FP8 P*V, the default) or \"fp16\" (P*V in "
                         "the input's 16-bit dtype, more accurate and slower), got " + pv.dump());
  return check_value_in("SAGE_ATTN", "extra.pv", pv.get<std::string>(), {"fp8", "fp16"});
}

std::optional<sage::PvMode> sage_pv_choice(const std::optional<AttentionSpec>& spec) {
  if (!spec || !spec->extra.is_object() || !spec->extra.contains("pv")) return std::nullopt;
  return spec->extra.at("pv") == "fp16" ? sage::PvMode::kFp16 : sage::PvMode::kFp8;
}

Result<sage::PvMode> sage_pv_mode(const std::optional<AttentionSpec>& spec, const PlatformInfo& platform) {
  // FP8 tensor cores: Ada (sm_89) and Hopper; the CPU implements the arithmetic itself.
  const bool fp8_kernel = platform.kind != PlatformKind::kCuda || platform.capability() >= 89;
  const std::optional<sage::PvMode> named = sage_pv_choice(spec);
  if (!named) return fp8_kernel ? sage::PvMode::kFp8 : sage::PvMode::kFp16;
  if (*named == sage::PvMode::kFp8 && !fp8_kernel)
    return Unsupported("SAGE_ATTN extra.pv \"fp8\" asks for FP8 P*V, which its kernel for " + platform.sm_string() +
                       " does not have (FP8 tensor cores: Ada, sm_89, and Hopper, sm_90); set \"pv\": \"fp16\" or leave pv "
                       "unset");
  return *named;
}

}  // namespace diffattn
