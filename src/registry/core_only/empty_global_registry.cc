// Compiled only into core-only builds (DIFFATTN_CORE_ONLY), which have no backends layer: the
// process-wide registry exists but holds no built-in backends; tests register their own.
#include "diffattn/registry.h"

namespace diffattn {

Registry& global_registry() {
  static Registry registry;
  return registry;
}

}  // namespace diffattn
