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

sage::PvMode sage_pv_mode(const std::optional<AttentionSpec>& spec) {
  if (spec && spec->extra.is_object() && spec->extra.contains("pv") && spec->extra.at("pv") == "fp16")
    return sage::PvMode::kFp16;
  return sage::PvMode::kFp8;
}

}  // namespace diffattn
