#include <optional>
#include <string>
#include <utility>

#include "backends/builtin.h"
#include "backends/fastvideo_vsa/fastvideo_vsa_backend.h"
#include "registry/builtin_registration.h"

namespace diffattn {
namespace {

const char kNoCudaKernels[] =
    "FASTVIDEO_VSA's CUDA kernels are not part of this diffattn build yet. Run it on CPU tensors (its CPU "
    "implementation is built), or select FLASH_ATTN or TORCH_SDPA instead.";

}  // namespace

void register_fastvideo_vsa(Registry& registry) {
  BackendDescriptor d;
  d.name = "FASTVIDEO_VSA";
  d.summary = "video sparse attention: pooled coarse attention picks top-k cubes for fine attention";
  d.caps = fastvideo_vsa_capabilities();
  d.kernels = {{DeviceKind::kCpu, "4x4x4 cubes, coarse branch and top-k, block-sparse fine branch"}};
  // The CPU implementation is always built; the CUDA kernels are not written yet.
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.kind == PlatformKind::kCpu) return std::nullopt;
    return kNoCudaKernels;
  };
  d.validate_options = validate_fastvideo_vsa_options;
  d.create = create_fastvideo_vsa_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
