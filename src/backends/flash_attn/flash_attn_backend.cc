#include "backends/factories.h"

namespace diffattn {

Result<std::unique_ptr<Backend>> create_flash_attn_backend(const BackendInit&) {
  return Unavailable("FLASH_ATTN kernels are not part of this diffattn build yet; select TORCH_SDPA instead");
}

}  // namespace diffattn
