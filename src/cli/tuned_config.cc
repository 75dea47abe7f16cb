#include "cli/tuned_config.h"

#include <vector>

#include "diffattn/config.h"
#include "runner/workload_runner.h"

namespace diffattn::cli {
namespace {

using nlohmann::json;

const runner::Configuration* configuration_named(const runner::RunReport& report, const std::string& label) {
  for (const runner::Configuration& c : report.configurations)
    if (c.label == label) return &c;
  return nullptr;
}

// The spec a configuration gives a role, as the selector would look it up.
std::optional<AttentionSpec> spec_for_role(const AttentionConfig& config, const runner::RolePlan& role) {
  std::optional<std::string_view> category;
  if (role.role.category) category = *role.role.category;
  const SpecLookup lookup = resolve_spec_for_role(config, role.role.role, category);
  if (lookup.spec == nullptr) return std::nullopt;
  return *lookup.spec;
}

}  // namespace

json tuned_config_json(const runner::RunReport& report) {
  json per_role = json::object();
  const AttentionSpec baseline = *runner::baseline_config().default_spec;
  for (const runner::RoleReport& role : report.roles) {
    std::optional<AttentionSpec> spec;
    if (role.verdict.configuration) {
      if (const runner::Configuration* c = configuration_named(report, *role.verdict.configuration))
        spec = spec_for_role(c->config, role.plan);
    }
    per_role[role.plan.role.role] = spec_to_json(spec.value_or(baseline));
  }
  return {{"default", nullptr}, {"per_role", per_role}};
}

json tuning_record_json(const runner::RunReport& report) {
  json roles = json::array();
  for (const runner::RoleReport& role : report.roles) {
    json candidates = json::array();
    for (const runner::BackendRun& run : role.runs) {
      candidates.push_back({{"configuration", run.configuration},
                            {"backend", run.backend},
                            {"median_ms", run.ok() ? json(run.median_ms()) : json(nullptr)},
                            {"rel_l2", run.ok() ? json(run.quality.rel_l2) : json(nullptr)},
                            {"error", run.error}});
    }
    roles.push_back({{"role", role.plan.role.role},
                     {"chosen", role.verdict.configuration ? json(role.verdict.backend) : json(nullptr)},
                     {"reason", role.verdict.reason},
                     {"baseline_median_ms", role.baseline.ok() ? json(role.baseline.median_ms()) : json(nullptr)},
                     {"candidates", candidates}});
  }
  return {{"tuned_on", platform_to_json(report.platform)},
          {"description", report.platform.describe()},
          {"diffattn_version", DIFFATTN_VERSION_STRING},
          {"created_utc", report.created_utc},
          {"model", report.plan.model ? json(report.plan.model->name) : json(nullptr)},
          {"quality_bound", report.request.quality_bound},
          {"roles", roles}};
}

}  // namespace diffattn::cli
