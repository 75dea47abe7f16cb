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
    "SAGE_ATTN_3 (FP4, Blackwell) kernels are not part of this diffattn build. "
    "Select CUDNN_ATTN or TORCH_SDPA instead.";

}  // namespace

void register_sage_attn_3(Registry& registry) {
  BackendDescriptor d;
  d.name = "SAGE_ATTN_3";
  d.summary = "SageAttention3 FP4 attention for Blackwell";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.head_sizes = {64, 128, 256};
  d.caps.gqa = false;
  d.caps.key_padding_mask = false;
  d.caps.dense_mask = false;
  d.caps.lse = false;
  d.cuda.needs = {need(PlatformFact::kArchitecture, "Blackwell-class GPUs (compute capability >= 10.0) only; this is {sm}")
                      .on({{100, 1 << 10}})
                      .when_explicit("requires a Blackwell-class GPU with compute capability >= 10.0; this is {sm}. "
                                     "Select {suggest} instead.")};
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.features.sage_attn_3) return std::nullopt;
    return kNotBuilt;
  };
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "SAGE_ATTN_3", {}); };
  d.create = unavailable_factory(kNotBuilt);
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
