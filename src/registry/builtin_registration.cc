#include "registry/builtin_registration.h"

#include <utility>

#include "diffattn/log.h"

namespace diffattn {

void register_or_warn(Registry& registry, BackendDescriptor descriptor) {
  Status status = registry.add(std::move(descriptor));
  if (!status.ok()) log_warning(status.message());
}

}  // namespace diffattn
