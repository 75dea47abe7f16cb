#pragma once
// diffattn's own backends. The selection core (registry, platform, selector, layer) takes
// registrations and never names these; this header belongs to the backends layer, above the core.

#include "diffattn/registry.h"

namespace diffattn {

// Fills `registry` with every built-in backend, one explicit call per backend.
void register_builtin_backends(Registry& registry);
// The process-wide registry, filled with the built-ins on first use.
Registry& global_registry();

}  // namespace diffattn
