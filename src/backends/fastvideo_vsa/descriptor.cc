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
    "FASTVIDEO_VSA (video sparse attention) kernels are not part of this diffattn build. "
    "Remove fastvideo_vsa_topk and select FLASH_ATTN or TORCH_SDPA instead.";

}  // namespace

void register_fastvideo_vsa(Registry& registry) {
  BackendDescriptor d;
  d.name = "FASTVIDEO_VSA";
  d.summary = "video sparse attention: pooled coarse attention picks top-k cubes for fine attention";
  d.caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.gqa = false;
  d.caps.causal = false;
  d.caps.key_padding_mask = false;
  d.caps.dense_mask = false;
  d.caps.lse = false;
  d.caps.cross = false;
  d.caps.option_blocks = {"fastvideo_vsa_topk"};
  d.unavailable_reason = [](const PlatformInfo&) -> std::optional<std::string> { return kNotBuilt; };
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "FASTVIDEO_VSA", {}); };
  d.create = unavailable_factory(kNotBuilt);
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
