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
    "SAGE_ATTN (INT8 Q*K^T, FP8 P*V) kernels are not part of this diffattn build. "
    "Select FLASH_ATTN or TORCH_SDPA instead.";

}  // namespace

void register_sage_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "SAGE_ATTN";
  d.summary = "SageAttention2-style INT8 Q*K^T with K smoothing and FP8 P*V";
  d.caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.head_sizes = {32, 64, 96, 128, 160, 192, 224, 256};
  d.caps.key_padding_mask = false;
  d.caps.dense_mask = false;
  d.caps.lse = false;
  d.cuda.needs = {need(PlatformFact::kArchitecture, "no SageAttention kernel for {sm}")
                      .on({{80, 80}, {86, 86}, {89, 90}, {120, 121}})
                      .when_explicit("does not provide a kernel for {sm} (SageAttention kernels exist for sm_80, "
                                     "sm_86, sm_89, sm_90, sm_120 and sm_121). Select {suggest} instead.")};
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.features.sage_attn) return std::nullopt;
    return kNotBuilt;
  };
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "SAGE_ATTN", {}); };
  d.create = unavailable_factory(kNotBuilt);
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
