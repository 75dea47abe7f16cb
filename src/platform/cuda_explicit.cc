// Explicit CUDA selections (docs/design/selection_contract.md): the backend's architecture needs come first (on the
// wrong GPU no build would help), then the device kind and availability, then the other facts
// the backend declares, then its head sizes. Every rule is the backend's declared data.

#include <string>

#include "common/strings.h"
#include "diffattn/log.h"
#include "platform/backend_checks.h"
#include "platform/cuda_platform.h"
#include "platform/routes.h"
#include "platform/requirements.h"

namespace diffattn {

Result<PlatformDecision> CudaPlatform::select_backend(std::optional<std::string_view> selected, int head_size,
                                                      const LayerTraits& traits) const {
  if (selected) return validate_explicit(ascii_upper(*selected), head_size);
  return choose_default(head_size, traits);
}

Result<PlatformDecision> CudaPlatform::validate_explicit(const std::string& name, int head_size) const {
  DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* backend, registry_.find(name));
  const requirements::TemplateValues values{&facts_, route_suggestion(cuda_route(facts_.capability), name),
                                            head_size, backend->caps.head_size_rule()};
  DIFFATTN_RETURN_IF_ERROR(requirements::check_architectures(*backend, values));
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_runs_on_kind(*backend, info_, values.suggest));
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_available(*backend, info_, registry_));
  DIFFATTN_RETURN_IF_ERROR(requirements::check_facts(*backend, values));
  DIFFATTN_RETURN_IF_ERROR(requirements::check_head_size(*backend, values));
  log_debug("Using diffusion attention backend " + name + " on " + facts_.device);
  return PlatformDecision{name, {}};
}

}  // namespace diffattn
