#include "diffattn/selector.h"

#include <utility>

#include "diffattn/log.h"
#include "diffattn/registry.h"
#include "diffattn/schedule.h"
#include "registry/option_checks.h"
#include "registry/unknown_backend_message.h"

namespace diffattn {
namespace {

ResolutionSource resolution_source(SpecSource source) {
  switch (source) {
    case SpecSource::kPerRole: return ResolutionSource::kPerRole;
    case SpecSource::kCategory: return ResolutionSource::kCategory;
    case SpecSource::kDefault: return ResolutionSource::kDefault;
    case SpecSource::kEnv: return ResolutionSource::kEnv;
  }
  return ResolutionSource::kDefault;
}

std::string resolution_log_line(const Resolution& r, std::string_view backend) {
  std::string line = "Resolved diffusion attention backend '" + std::string(backend) + "' for role='" + r.role + "'";
  if (r.category) line += " (role_category='" + *r.category + "')";
  return line + " via " + r.source_detail;
}

// The typed blocks and extra keys of an explicit spec must be ones the chosen backend reads.
Status validate_spec_for_backend(const BackendDescriptor& backend, const AttentionSpec& spec) {
  DIFFATTN_RETURN_IF_ERROR(check_option_blocks(backend, spec));
  if (backend.validate_options) return backend.validate_options(spec);
  return Status::Ok();
}

}  // namespace

Selector::Selector(std::shared_ptr<const Platform> platform, const Registry* registry)
    : platform_(std::move(platform)), registry_(registry) {}

std::size_t Selector::platform_queries() const {
  std::lock_guard lock(mu_);
  return platform_queries_;
}

Result<PlatformDecision> Selector::decide(const Key& key) {
  std::lock_guard lock(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  const auto& [name, head_size, traits] = key;
  // Held while the platform decides, so that each key is decided exactly once under concurrency.
  ++platform_queries_;
  Result<PlatformDecision> decision =
      platform_->select_backend(name.empty() ? std::nullopt : std::optional<std::string_view>(name), head_size,
                                traits);
  // Platforms look names up upper-cased; the user is told the name as they wrote it.
  if (!decision.ok() && decision.status().code() == ErrorCode::kUnknownBackend && !name.empty())
    decision = Result<PlatformDecision>(UnknownBackend(unknown_backend_message(name, registry_->names())));
  cache_.emplace(key, decision);
  return decision;
}

Result<Resolution> Selector::resolve(std::string_view role, int head_size, const AttentionConfig& config,
                                     std::optional<std::string_view> category, const LayerTraits& traits) {
  return resolve_in(role, head_size, config, category, traits, "");
}

Result<Resolution> Selector::resolve_profile(const AttentionSchedule& schedule, std::string_view profile,
                                             std::string_view role, int head_size,
                                             std::optional<std::string_view> category, const LayerTraits& traits) {
  const auto it = schedule.profiles.find(std::string(profile));
  if (it == schedule.profiles.end())
    return Internal("Selector::resolve_profile: '" + std::string(profile) + "' is not a profile of the schedule");
  const std::string context =
      "schedule profile '" + std::string(profile) + "' (" + profile_ranges_text(schedule, profile) + ")";
  Result<Resolution> r = resolve_in(role, head_size, it->second, category, traits, context);
  if (!r.ok()) {
    return Status(r.status().code(), context + ", role '" + std::string(role) + "': " + r.status().message());
  }
  r->profile = std::string(profile);
  return r;
}

Result<Resolution> Selector::resolve_in(std::string_view role, int head_size, const AttentionConfig& config,
                                        std::optional<std::string_view> category, const LayerTraits& traits,
                                        const std::string& context) {
  const SpecLookup lookup = resolve_spec_for_role(config, role, category);
  Resolution r;
  r.role = std::string(role);
  if (category) r.category = std::string(*category);
  r.head_size = head_size;

  // Explicit names key with unconstrained traits: the platform ignores traits for them.
  const Key key = lookup.spec ? Key{lookup.spec->backend, head_size, LayerTraits::Unconstrained()}
                              : Key{"", head_size, traits};
  DIFFATTN_ASSIGN_OR_RETURN(PlatformDecision decision, decide(key));
  DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* backend, registry_->find(decision.backend));

  r.backend = decision.backend;
  r.considered = std::move(decision.considered);
  if (lookup.spec) {
    DIFFATTN_RETURN_IF_ERROR(validate_spec_for_backend(*backend, *lookup.spec));
    r.spec = *lookup.spec;
    r.source = resolution_source(lookup.source.value_or(SpecSource::kDefault));
    r.source_detail = lookup.source_detail.empty() ? "attention_config" : lookup.source_detail;
  } else {
    r.source = ResolutionSource::kPlatform;
    r.source_detail = "platform default";
  }
  if (!context.empty()) r.source_detail = context + ": " + r.source_detail;

  bool first_time = false;
  {
    std::lock_guard lock(mu_);
    first_time = logged_.emplace(r.role, r.category.value_or(""), backend->name, r.source_detail).second;
  }
  if (first_time) log_info(resolution_log_line(r, backend->name));
  return r;
}

}  // namespace diffattn
