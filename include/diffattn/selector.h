#pragma once
// Resolves the backend for one attention role: exact role > category > default > environment >
// platform default. Explicit names are validated by the platform (error, never a silent swap);
// defaults are chosen by it. Decisions are cached and logged once per (role, category, backend, source).

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>
#include <map>

#include <nlohmann/json.hpp>

#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/status.h"

namespace diffattn {

enum class ResolutionSource { kPerRole, kCategory, kDefault, kEnv, kPlatform };
std::string_view source_name(ResolutionSource source);  // per_role, category, default, env, platform

struct Resolution {
  std::string role;
  std::optional<std::string> category;
  int head_size = 0;
  std::string backend;                 // canonical name, e.g. "FLASH_ATTN"
  std::optional<AttentionSpec> spec;   // absent for a platform default: do not read that as TORCH_SDPA
  ResolutionSource source = ResolutionSource::kPlatform;
  std::string source_detail;           // "per_role['cross']", "attention_config.default", "platform default"
  std::vector<Considered> considered;  // defaults passed over, with reasons
  std::optional<std::string> profile;  // the attention schedule's profile resolved; absent: the base configuration
};

nlohmann::json resolution_to_json(const Resolution& resolution);

class Registry;
struct AttentionSchedule;

class Selector {
 public:
  // `registry` (not null; usually the one `platform` was made with) supplies display names, option
  // validation and factories. It must outlive the selector.
  Selector(std::shared_ptr<const Platform> platform, const Registry* registry);

  // Safe to call from many threads.
  Result<Resolution> resolve(std::string_view role, int head_size, const AttentionConfig& config,
                             std::optional<std::string_view> category = std::nullopt,
                             const LayerTraits& traits = LayerTraits::Unconstrained());

  // resolve() of one attention schedule profile's configuration: the profile and its ranges are named
  // in source_detail ("schedule profile 'sparse' (steps [10, end)): attention_config.default"), in
  // the log line and in any error. `profile` must be one of schedule.profiles.
  Result<Resolution> resolve_profile(const AttentionSchedule& schedule, std::string_view profile, std::string_view role,
                                     int head_size, std::optional<std::string_view> category = std::nullopt,
                                     const LayerTraits& traits = LayerTraits::Unconstrained());

  const Platform& platform() const { return *platform_; }
  const Registry& registry() const { return *registry_; }
  std::size_t platform_queries() const;  // how often the platform was consulted (cache misses)

 private:
  // (backend name as given or "" for the default, head size, the layer's traits). Explicit
  // selections always key with unconstrained traits, as the platform ignores them there.
  using Key = std::tuple<std::string, int, LayerTraits>;
  Result<PlatformDecision> decide(const Key& key);
  // `context` (empty for the base configuration) leads source_detail: "schedule profile 'x' (...): ".
  Result<Resolution> resolve_in(std::string_view role, int head_size, const AttentionConfig& config,
                                std::optional<std::string_view> category, const LayerTraits& traits,
                                const std::string& context);

  std::shared_ptr<const Platform> platform_;
  const Registry* registry_;
  mutable std::mutex mu_;
  std::map<Key, Result<PlatformDecision>> cache_;
  std::set<std::tuple<std::string, std::string, std::string, std::string>> logged_;
  std::size_t platform_queries_ = 0;
};

}  // namespace diffattn
