#include "platform/cpu_platform.h"

#include <string>

#include "diffattn/log.h"
#include "common/strings.h"
#include "platform/backend_checks.h"
#include "platform/requirements.h"
#include "platform/routes.h"

namespace diffattn {

Result<PlatformDecision> CpuPlatform::select_backend(std::optional<std::string_view> selected, int head_size,
                                                     const LayerTraits&) const {
  if (selected) return validate_explicit(ascii_upper(*selected), head_size);
  return choose_default(head_size);
}

Result<PlatformDecision> CpuPlatform::validate_explicit(const std::string& name, int head_size) const {
  DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* backend, registry_.find(name));
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_runs_on_kind(*backend, info_, route_suggestion(cpu_route(), name)));
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_available(*backend, info_, registry_));
  DIFFATTN_RETURN_IF_ERROR(requirements::check_head_size(
      *backend, {nullptr, route_suggestion(cpu_route(), name), head_size, backend->caps.head_size_rule()}));
  log_debug("Using diffusion attention backend " + name + " on " + info_.describe());
  return PlatformDecision{name, {}};
}

Result<PlatformDecision> CpuPlatform::choose_default(int head_size) const {
  const std::string name(cpu_route().defaults.front());
  if (std::optional<std::string> blocker = platform_checks::default_blocker(registry_, info_, name)) {
    return Unavailable("No default diffusion attention backend on " + info_.describe() + ": " + name + " " +
                       *blocker + ". Register " + name + " (register_builtin_backends) or select a backend explicitly.");
  }
  const BackendDescriptor* backend = *registry_.find(name);
  if (head_size > 0 && !backend->caps.supports_head_size(head_size)) {
    return Unsupported("No diffusion attention backend runs head_size=" + std::to_string(head_size) + " on " +
                       info_.describe() + ": " + name + " supports " + backend->caps.head_size_rule() + ".");
  }
  log_debug("Defaulting to diffusion attention backend " + name + " on " + info_.describe());
  return PlatformDecision{name, {}};
}

}  // namespace diffattn
