// The schedule's command-line surfaces combined: its JSON object, then dotted flags merged on top.

#include <string>

#include "config/dotted_flags.h"
#include "config/json_values.h"
#include "diffattn/schedule.h"

namespace diffattn {

Result<std::optional<AttentionSchedule>> parse_attention_schedule(const ScheduleSources& sources,
                                                                  const Registry& registry) {
  nlohmann::json root = nlohmann::json::object();
  if (sources.json) {
    DIFFATTN_ASSIGN_OR_RETURN(root, config_detail::parse_json_text(*sources.json, "--diffusion-attention-schedule"));
    if (root.is_null()) root = nlohmann::json::object();
    if (!root.is_object()) {
      return InvalidConfig("--diffusion-attention-schedule must be a JSON object with keys profiles and steps (or "
                           "sigma); got " + std::string(config_detail::json_type_name(root)) + " " +
                           config_detail::brief_json(root) +
                           ". Example: {\"profiles\": {\"sparse\": {\"default\": \"SAGE_ATTN\"}}, \"steps\": "
                           "[{\"start\": 10, \"end\": null, \"profile\": \"sparse\"}]}.");
    }
  }
  DIFFATTN_RETURN_IF_ERROR(config_detail::merge_dotted_flags(root, sources.dotted, "--diffusion-attention-schedule."));
  return schedule_from_json(root, registry);
}

}  // namespace diffattn
