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
    "TRTLLM_ATTN runs the trtllm-gen FMHA kernels of datacenter Blackwell GPUs (SM100 / SM103), which are "
    "not part of this diffattn build. Select CUDNN_ATTN, FLASH_ATTN or TORCH_SDPA instead.";

Status validate_trtllm_options(const AttentionSpec& spec) {
  DIFFATTN_RETURN_IF_ERROR(check_extra_keys(spec, "TRTLLM_ATTN", {}));
  if (!spec.quant) return Status::Ok();
  if (spec.quant->flashinfer_backend) {
    return InvalidConfig("quant.flashinfer_backend is read by FLASHINFER_ATTN only; remove it from the "
                         "TRTLLM_ATTN quant block.");
  }
  if (!spec.quant->dtype_qk) {
    return InvalidConfig("TRTLLM_ATTN quant (SAGE) needs quant.dtype_qk: one of int8, fp8_e4m3.");
  }
  return check_value_in("TRTLLM_ATTN quant (SAGE)", "quant.dtype_qk", *spec.quant->dtype_qk, {"int8", "fp8_e4m3"});
}

}  // namespace

void register_trtllm_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "TRTLLM_ATTN";
  d.summary = "trtllm-gen FMHA for datacenter Blackwell; SAGE quant and skip-softmax blocks";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kBFloat16};
  d.caps.head_sizes = {128};
  d.caps.key_padding_mask = false;  // padding is expressed as packed sequences instead
  d.caps.dense_mask = false;
  d.caps.lse = false;
  d.caps.varlen = true;
  d.caps.option_blocks = {"quant", "skip_softmax"};
  d.cuda.needs = {
      need(PlatformFact::kArchitecture, "datacenter Blackwell (SM100 / SM103) only; this is {sm}")
          .on({{100, 109}})
          .when_explicit("requires a datacenter Blackwell GPU (SM100 / SM103, compute capability 10.x); this is "
                         "{device}. Select a different --diffusion-attention-backend, such as {suggest}."),
      need(PlatformFact::kTrtllmGen, "the trtllm-gen FMHA kernels are not available")
          .when_explicit("the trtllm-gen FMHA kernels are not available on {device}. Use a build with them, or "
                         "select {suggest}.")};
  // Chosen unasked only for layers whose calls are mask-free and packed (docs/design/selection_contract.md).
  d.cuda.default_needs_trait = &LayerTraits::allows_trtllm_default;
  d.cuda.trait_reason = "the model does not declare a mask-free attention path (allow_trtllm_default is false)";
  d.head_size_reasons.default_reason = "head_size {head} != {rule}";
  d.head_size_reasons.default_needs_known = true;
  d.unavailable_reason = [](const PlatformInfo& platform) -> std::optional<std::string> {
    if (platform.features.trtllm_gen) return std::nullopt;
    return kNotBuilt;
  };
  d.validate_options = validate_trtllm_options;
  d.create = unavailable_factory(kNotBuilt);
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
