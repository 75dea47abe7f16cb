#pragma once

#include "diffattn/registry.h"

namespace diffattn {

// Adds a built-in descriptor; a failure (the name is already taken, e.g. built-ins registered
// twice into one registry) is logged as a warning rather than dropped.
void register_or_warn(Registry& registry, BackendDescriptor descriptor);

}  // namespace diffattn
