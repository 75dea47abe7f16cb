#include "runner/configurations.h"

#include <algorithm>
#include <cctype>

#include "common/strings.h"
#include "registry/unknown_backend_message.h"

namespace diffattn::runner {
namespace {

// The platform owns compatibility policy: a backend is "available" when it accepts the backend by name.
std::vector<std::string> available_backends(const PlatformInfo& platform, const Registry& registry) {
  const auto policy = make_platform(platform, registry);
  std::vector<std::string> names;
  for (const std::string& name : registry.names())
    if (policy->select_backend(name, 0, LayerTraits::Unconstrained()).ok()) names.push_back(name);
  return names;
}

// An entry that names no registered backend is a usage error before any work starts (exit 2).
Status check_compare_name(const std::string& entry, const Registry& registry) {
  if (registry.find(ascii_upper(entry)).ok()) return Status::Ok();
  return UnknownBackend("--compare: " + unknown_backend_message(entry, registry.names()) + ", auto or all");
}

Result<Configuration> compare_entry(const AttentionConfig& user, const std::string& entry, const Registry& registry) {
  Configuration c;
  c.config = user;
  c.config.default_origin = DefaultOrigin::kConfig;
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<AttentionSpec> spec,
                            spec_from_json(nlohmann::json(entry), "--compare", registry));
  if (spec) DIFFATTN_RETURN_IF_ERROR(check_compare_name(entry, registry));
  c.config.default_spec = spec;
  c.label = spec ? ascii_upper(entry) : "auto";
  return c;
}

}  // namespace

Result<std::vector<Configuration>> make_configurations(const AttentionConfig& user, const std::vector<std::string>& compare,
                                                       const PlatformInfo& platform, const Registry& registry,
                                                       const std::optional<AttentionSchedule>& schedule) {
  if (compare.empty()) {
    const std::string label = schedule ? "scheduled" : user.empty() ? "platform default" : "configured";
    return std::vector<Configuration>{{label, user, schedule}};
  }
  if (user.default_spec && user.default_origin != DefaultOrigin::kEnv)
    return InvalidConfig("--compare sets the default backend of each configuration it runs; drop "
                         "--diffusion-attention-backend / default.backend (per_role entries may stay)");
  std::vector<std::string> entries;
  for (const std::string& e : compare) {
    if (ascii_upper(e) == "ALL") {
      for (const std::string& n : available_backends(platform, registry)) entries.push_back(n);
    } else {
      entries.push_back(e);
    }
  }
  std::vector<Configuration> configs;
  for (const std::string& e : entries) {
    DIFFATTN_ASSIGN_OR_RETURN(Configuration c, compare_entry(user, e, registry));
    c.schedule = schedule;
    const bool duplicate = std::any_of(configs.begin(), configs.end(), [&](const Configuration& x) { return x.label == c.label; });
    if (!duplicate) configs.push_back(std::move(c));
  }
  if (configs.empty()) return InvalidConfig("--compare named no configuration; give backend names such as TORCH_SDPA,FLASH_ATTN");
  return configs;
}

}  // namespace diffattn::runner
