#include "config/json_values.h"
#include "diffattn/config.h"

namespace diffattn {

SpecLookup resolve_spec_for_role(const AttentionConfig& config, std::string_view role,
                                 std::optional<std::string_view> category) {
  SpecLookup lookup;
  if (auto it = config.per_role.find(std::string(role)); it != config.per_role.end()) {
    lookup.spec = &it->second;
    lookup.source = SpecSource::kPerRole;
    lookup.source_detail = "per_role[" + config_detail::repr(role) + "]";
    return lookup;
  }
  if (category) {
    if (auto it = config.per_role.find(std::string(*category)); it != config.per_role.end()) {
      lookup.spec = &it->second;
      lookup.source = SpecSource::kCategory;
      lookup.source_detail = "per_role[" + config_detail::repr(*category) + "] (role_category fallback)";
      return lookup;
    }
  }
  if (config.default_spec) {
    lookup.spec = &*config.default_spec;
    const bool from_env = config.default_origin == DefaultOrigin::kEnv;
    lookup.source = from_env ? SpecSource::kEnv : SpecSource::kDefault;
    lookup.source_detail = from_env ? "DIFFUSION_ATTENTION_BACKEND" : "attention_config.default";
  }
  return lookup;
}

}  // namespace diffattn
