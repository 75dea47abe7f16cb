#include <mutex>

#include "diffattn/builtin_backends.h"

namespace diffattn {

Registry& global_registry() {
  static Registry registry;
  static std::once_flag filled;
  std::call_once(filled, [] { register_builtin_backends(registry); });
  return registry;
}

}  // namespace diffattn
