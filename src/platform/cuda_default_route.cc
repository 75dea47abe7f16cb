// Default CUDA routing (docs/design/selection_contract.md): the route of the device's architecture (routes.cc)
// is tried in order and the first backend whose declared needs hold is the default; every
// candidate passed over is recorded with its reason.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "diffattn/log.h"
#include "platform/backend_checks.h"
#include "platform/cudnn_version.h"
#include "platform/cuda_platform.h"
#include "platform/routes.h"
#include "platform/requirements.h"

namespace diffattn {
namespace {

bool is_tested(const Route& route, int capability) {
  return route.tested.empty() || std::find(route.tested.begin(), route.tested.end(), capability) != route.tested.end();
}

std::string head_text(int head_size) { return head_size > 0 ? std::to_string(head_size) : "unknown"; }

}  // namespace

Result<PlatformDecision> CudaPlatform::choose_default(int head_size, const LayerTraits& traits) const {
  const CudaFacts& f = facts_;
  const Route& route = cuda_route(f.capability);
  if (!is_tested(route, f.capability)) {
    log_info("Detected " + std::string(route.label) + "-class GPU " + f.sm + " (untested variant); routing as " +
             std::string(route.label) + ".");
  }
  std::vector<Considered> considered;
  for (std::string_view candidate : route.defaults) {
    const std::string name(candidate);
    // The backend's own needs give the more specific reason, so they are asked first.
    std::optional<std::string> blocker;
    if (Result<const BackendDescriptor*> backend = registry_.find(name); backend.ok()) {
      const requirements::TemplateValues values{&f, route_suggestion(route, name), head_size,
                                                (*backend)->caps.head_size_rule()};
      blocker = requirements::default_blocker(**backend, values, traits);
    }
    if (!blocker) blocker = platform_checks::default_blocker(registry_, info_, name);
    if (blocker) {
      considered.push_back({name, *blocker});
      continue;
    }
    const std::string why = std::string(route.label) + " " + f.sm +
                            (f.cudnn_version > 0 ? ", cuDNN " + cudnn_version_string(f.cudnn_version) : "") +
                            ", head_dim " + head_text(head_size);
    if (candidate == route.defaults.back()) {
      log_debug("Defaulting to diffusion attention backend " + name + " on " + f.device);
    } else {
      log_info("Defaulting to diffusion attention backend " + name + " (" + why + ")");
    }
    return PlatformDecision{name, considered};
  }
  const std::string reasons =
      join(considered, "; ", "", [](const Considered& c) { return c.backend + ": " + c.reason; });
  return Unsupported("No diffusion attention backend can run head_size=" + head_text(head_size) + " on " + f.device +
                     " (" + reasons + "). Choose a head size " + std::string(route.defaults.back()) +
                     " supports, or register a backend that runs it.");
}

}  // namespace diffattn
