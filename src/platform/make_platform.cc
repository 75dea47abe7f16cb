#include <memory>

#include "diffattn/platform.h"
#include "platform/cpu_platform.h"
#include "platform/cuda_platform.h"

namespace diffattn {

std::shared_ptr<const Platform> make_platform(PlatformInfo info, const Registry& registry) {
  if (info.kind == PlatformKind::kCuda) return std::make_shared<CudaPlatform>(std::move(info), registry);
  return std::make_shared<CpuPlatform>(std::move(info), registry);
}

}  // namespace diffattn
