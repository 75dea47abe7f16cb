#include "platform/cpu_platform.h"

#include <string>

#include "diffattn/log.h"
#include "platform/backend_checks.h"

namespace diffattn {

Result<PlatformDecision> CpuPlatform::select_backend(std::optional<std::string_view> selected, int head_size,
                                                     bool) const {
  if (selected) return validate_explicit(platform_checks::upper(*selected), head_size);
  return choose_default(head_size);
}

Result<PlatformDecision> CpuPlatform::validate_explicit(const std::string& name, int head_size) const {
  DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* backend, platform_checks::find_backend(registry_, name));
  DIFFATTN_RETURN_IF_ERROR(
      platform_checks::check_runs_on_kind(*backend, info_, "TORCH_SDPA (or another backend with CPU kernels)"));
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_available(*backend, info_, registry_));
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_head_size(*backend, head_size));
  log_debug("Using diffusion attention backend " + name + " on " + info_.describe());
  return PlatformDecision{name, {}};
}

Result<PlatformDecision> CpuPlatform::choose_default(int head_size) const {
  const std::string name = "TORCH_SDPA";
  if (std::optional<std::string> blocker = platform_checks::default_blocker(registry_, info_, name)) {
    return Unavailable("No default diffusion attention backend on " + info_.describe() + ": TORCH_SDPA " +
                       *blocker + ". Register TORCH_SDPA (register_builtin_backends) or select a backend explicitly.");
  }
  const BackendDescriptor* backend = *registry_.find(name);
  if (head_size > 0 && !backend->caps.supports_head_size(head_size)) {
    return Unsupported("No diffusion attention backend runs head_size=" + std::to_string(head_size) + " on " +
                       info_.describe() + ": TORCH_SDPA supports " + backend->caps.head_size_rule() + ".");
  }
  log_debug("Defaulting to diffusion attention backend TORCH_SDPA on " + info_.describe());
  return PlatformDecision{name, {}};
}

}  // namespace diffattn
