#include <optional>
#include <string>
#include <utility>

#include "backends/builtin.h"
#include "registry/builtin_registration.h"
#include "registry/option_checks.h"
#include "registry/unavailable_backend.h"

namespace diffattn {
namespace {

const char kNotBuilt[] =
    "RAINFUSION_ATTN (block-sparse video attention) kernels are not part of this diffattn build. "
    "Remove the block_sparse block and select FLASH_ATTN or TORCH_SDPA instead.";

}  // namespace

void register_rainfusion_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "RAINFUSION_ATTN";
  d.summary = "training-free block-sparse video attention driven by the block_sparse block";
  d.caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.caps.dtypes = {DType::kBFloat16};
  d.caps.head_sizes = {64, 96, 128, 192, 256};
  d.caps.gqa = false;
  d.caps.causal = false;
  d.caps.key_padding_mask = false;
  d.caps.dense_mask = false;
  d.caps.lse = false;
  d.caps.option_blocks = {"block_sparse"};
  d.unavailable_reason = [](const PlatformInfo&) -> std::optional<std::string> { return kNotBuilt; };
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "RAINFUSION_ATTN", {}); };
  d.create = unavailable_factory(kNotBuilt);
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
