#include "platform/routes.h"

#include <algorithm>

#include "common/strings.h"

namespace diffattn {
namespace {

// CUDNN_ATTN and FLASHINFER_ATTN are never chosen automatically before Blackwell; FLASH_ATTN is
// tried below sm_80 only so that the passed-over list says why it was not taken.
const std::vector<Route>& routes() {
  static const std::vector<Route> kRoutes = {
      {"Blackwell",
       {{100, 129}},
       {"TRTLLM_ATTN", "CUDNN_ATTN", "FLASHINFER_ATTN", "FLASH_ATTN", "TORCH_SDPA"},
       {"CUDNN_ATTN", "TORCH_SDPA"},
       {100, 103, 120, 121}},
      {"Ampere/Ada/Hopper", {{80, 99}, {130, 1 << 10}}, {"FLASH_ATTN", "TORCH_SDPA"}, {"FLASH_ATTN", "TORCH_SDPA"}, {}},
      {"pre-Ampere", {{0, 79}}, {"FLASH_ATTN", "TORCH_SDPA"}, {"TORCH_SDPA"}, {}},
  };
  return kRoutes;
}

}  // namespace

const Route& cpu_route() {
  static const Route kCpu = {"CPU", {}, {"TORCH_SDPA"}, {"TORCH_SDPA (or another backend with CPU kernels)"}, {}};
  return kCpu;
}

const Route& cuda_route(int capability) {
  for (const Route& route : routes()) {
    for (const CapabilityRange& range : route.archs) {
      if (range.contains(capability)) return route;
    }
  }
  return routes().back();
}

std::string route_suggestion(const Route& route, std::string_view rejected) {
  std::vector<std::string_view> names;
  std::copy_if(route.suggest.begin(), route.suggest.end(), std::back_inserter(names),
               [&](std::string_view name) { return name != rejected; });
  return join(names, " or ");
}

}  // namespace diffattn
