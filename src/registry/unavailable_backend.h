#pragma once
// Descriptor parts for a backend whose kernels this build does not hold: it stays registered (so
// `diffattn backends` lists it with the reason) and creating it fails with the same text.

#include <string>

#include "diffattn/registry.h"

namespace diffattn {

BackendFactory unavailable_factory(std::string reason);

}  // namespace diffattn
