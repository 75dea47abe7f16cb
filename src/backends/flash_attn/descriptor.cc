#include <utility>

#include "backends/builtin.h"
#include "backends/factories.h"
#include "registry/builtin_registration.h"
#include "registry/option_checks.h"

namespace diffattn {

// Which devices have FLASH_ATTN kernels is routing policy: the CUDA platform decides from the
// platform's features, so the descriptor carries no unavailable_reason.
void register_flash_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "FLASH_ATTN";
  d.display_name = "FLASH_ATTN";
  d.summary = "diffattn FlashAttention kernels: Hopper (wgmma + TMA) and Ampere/Ada (mma.sync)";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.head_sizes = {64, 96, 128, 192, 256};
  d.caps.dense_mask = false;  // 2D key-padding masks run as packed variable-length batches
  d.caps.varlen = true;
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "FLASH_ATTN", {}); };
  d.create = create_flash_attn_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
