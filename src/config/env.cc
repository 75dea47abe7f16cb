#include <cstdlib>

#include "diffattn/config.h"

namespace diffattn {

std::optional<std::string> env_attention_backend() {
  const char* value = std::getenv("DIFFUSION_ATTENTION_BACKEND");
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace diffattn
