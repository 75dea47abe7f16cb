#include <optional>
#include <string>
#include <utility>

#include "backends/builtin.h"
#include "backends/rainfusion_attn/rainfusion_backend.h"
#include "registry/builtin_registration.h"

namespace diffattn {
namespace {

const char kNoCudaKernels[] =
    "RAINFUSION_ATTN's CUDA kernels are not part of this diffattn build yet. Run it on CPU tensors (its CPU "
    "implementation is built), or select FLASH_ATTN or TORCH_SDPA instead.";

}  // namespace

void register_rainfusion_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "RAINFUSION_ATTN";
  d.summary = "training-free block-sparse video attention driven by the block_sparse block";
  d.caps = rainfusion_attn_capabilities();
  d.kernels = {{DeviceKind::kCpu, "frame patches, per-head pattern from sampled scores, block-sparse fine pass"}};
  // The CPU implementation is always built; the CUDA kernels are not written yet.
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.kind == PlatformKind::kCpu) return std::nullopt;
    return kNoCudaKernels;
  };
  d.validate_options = validate_rainfusion_attn_options;
  d.create = create_rainfusion_attn_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
