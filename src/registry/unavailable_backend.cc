#include "registry/unavailable_backend.h"

#include <utility>

namespace diffattn {

BackendFactory unavailable_factory(std::string reason) {
  return [reason = std::move(reason)](const BackendInit&) -> Result<std::unique_ptr<Backend>> {
    return Unavailable(reason);
  };
}

}  // namespace diffattn
