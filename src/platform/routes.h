#pragma once
// The ordered default routes per platform and CUDA architecture (docs/design/selection_contract.md): the one place in
// platform/ that names backends. Adding a backend that may be chosen automatically is one entry here.

#include <string>
#include <string_view>
#include <vector>

#include "diffattn/requirements.h"

namespace diffattn {

struct Route {
  std::string_view label;               // "Blackwell"
  std::vector<CapabilityRange> archs;   // the architectures this route serves
  std::vector<std::string_view> defaults;  // tried in order; the first compatible one is the default
  std::vector<std::string_view> suggest;   // what an explicit rejection offers instead
  std::vector<int> tested;              // capabilities routed as tested; others are logged as untested variants
};

// The route of a compute capability (major * 10 + minor).
const Route& cuda_route(int capability);
// The CPU route.
const Route& cpu_route();

// `route.suggest` without `rejected`, as text: "CUDNN_ATTN or TORCH_SDPA".
std::string route_suggestion(const Route& route, std::string_view rejected);

}  // namespace diffattn
