// Explicit CUDA selections, checked in the order of docs/design/selection_contract.md. The
// architecture rules of SAGE_ATTN, SAGE_ATTN_3 and TRTLLM_ATTN come first: on the wrong GPU no
// build would help.

#include <string>

#include "diffattn/log.h"
#include "platform/backend_checks.h"
#include "platform/cuda_platform.h"

namespace diffattn {
namespace {

Status check_sage_attn_arch(const CudaFacts& f) {
  const int cc = f.major * 10 + f.minor;
  if (cc == 80 || cc == 86 || cc == 89 || cc == 90 || cc == 120 || cc == 121) return Status::Ok();
  return Unsupported("SAGE_ATTN was explicitly selected but does not provide a kernel for " + f.sm +
                     " (SageAttention kernels exist for sm_80, sm_86, sm_89, sm_90, sm_120 and sm_121). Select " +
                     cuda_suggestion(f) + " instead.");
}

Status check_sage_attn_3_arch(const CudaFacts& f) {
  if (f.major >= 10) return Status::Ok();
  return Unsupported("SAGE_ATTN_3 was explicitly selected but requires a Blackwell-class GPU with compute "
                     "capability >= 10.0; this is " + f.sm + ". Select " + cuda_suggestion(f) + " instead.");
}

Status check_trtllm_arch(const CudaFacts& f) {
  if (f.datacenter_blackwell) return Status::Ok();
  return Unsupported("TRTLLM_ATTN was explicitly selected but requires a datacenter Blackwell GPU (SM100 / SM103, "
                     "compute capability 10.x); this is " + f.device +
                     ". Select a different --diffusion-attention-backend, such as " + cuda_suggestion(f) + ".");
}

Status check_flash_attn_supported(const CudaFacts& f) {
  if (!f.flash_attn_unsupported) return Status::Ok();
  const std::string instead = f.blackwell ? "CUDNN_ATTN or TORCH_SDPA" : "TORCH_SDPA";
  return Unsupported("FLASH_ATTN was explicitly selected but is unsupported on " + f.sm + " (" +
                     *f.flash_attn_unsupported + "). Select " + instead + " instead.");
}

Status check_flashinfer(const CudaFacts& f, int head_size) {
  if (!f.flashinfer) {
    return Unavailable("FLASHINFER_ATTN was explicitly selected, but FlashInfer is unavailable on " + f.device +
                       ". Use a build with FlashInfer or select a different backend.");
  }
  if (!f.flashinfer_prefill) {
    return Unavailable("FLASHINFER_ATTN was explicitly selected, but the FlashInfer build does not provide the "
                       "ragged prefill kernels (BatchPrefillWithRaggedKVCacheWrapper). Use a FlashInfer build "
                       "that has them, or select " + cuda_suggestion(f) + ".");
  }
  if (head_size > 0 && !flashinfer_supports_head_size(head_size)) {
    return Unsupported("FLASHINFER_ATTN was explicitly selected but head_size=" + std::to_string(head_size) +
                       " is unsupported. Supported head sizes: 64, 128, 256. Select TORCH_SDPA or another backend.");
  }
  return Status::Ok();
}

Status check_cudnn(const CudaFacts& f, int head_size) {
  if (head_size > 0 && !cudnn_supports_head_size(head_size)) {
    return Unsupported("CUDNN_ATTN was explicitly selected but head_size=" + std::to_string(head_size) +
                       " is unsupported. cuDNN fused attention needs a head size that is a multiple of 8 and at "
                       "most 256. Select FLASHINFER_ATTN or TORCH_SDPA.");
  }
  if (f.cudnn_version < 90000) {
    const std::string found = f.cudnn_present ? "found cuDNN " + std::to_string(f.cudnn_version) : "found none";
    return Unavailable("CUDNN_ATTN was explicitly selected but needs cuDNN 9 or newer on " + f.device + " (" + found +
                       "). Install cuDNN 9 (e.g. the libcudnn9 packages) or select TORCH_SDPA.");
  }
  return Status::Ok();
}

Status check_trtllm_gen(const CudaFacts& f) {
  if (f.trtllm_gen) return Status::Ok();
  return Unavailable("TRTLLM_ATTN was explicitly selected, but the trtllm-gen FMHA kernels are not available on " +
                     f.device + ". Use a build with them, or select CUDNN_ATTN or TORCH_SDPA.");
}

}  // namespace

Result<PlatformDecision> CudaPlatform::select_backend(std::optional<std::string_view> selected, int head_size,
                                                      bool allow_trtllm_default) const {
  if (selected) return validate_explicit(platform_checks::upper(*selected), head_size);
  return choose_default(head_size, allow_trtllm_default);
}

Result<PlatformDecision> CudaPlatform::validate_explicit(const std::string& name, int head_size) const {
  const CudaFacts& f = facts_;
  if (name == "SAGE_ATTN") DIFFATTN_RETURN_IF_ERROR(check_sage_attn_arch(f));
  if (name == "SAGE_ATTN_3") DIFFATTN_RETURN_IF_ERROR(check_sage_attn_3_arch(f));
  if (name == "TRTLLM_ATTN") DIFFATTN_RETURN_IF_ERROR(check_trtllm_arch(f));

  DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* backend, platform_checks::find_backend(registry_, name));
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_runs_on_kind(*backend, info_, cuda_suggestion(f)));
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_available(*backend, info_, registry_));

  if (name == "FLASH_ATTN") DIFFATTN_RETURN_IF_ERROR(check_flash_attn_supported(f));
  if (name == "FLASHINFER_ATTN") DIFFATTN_RETURN_IF_ERROR(check_flashinfer(f, head_size));
  if (name == "CUDNN_ATTN") DIFFATTN_RETURN_IF_ERROR(check_cudnn(f, head_size));
  if (name == "TRTLLM_ATTN") DIFFATTN_RETURN_IF_ERROR(check_trtllm_gen(f));
  // Every backend's own head sizes (SAGE_ATTN_3 64/128/256, FLASH_ATTN's compiled set, ...).
  DIFFATTN_RETURN_IF_ERROR(platform_checks::check_head_size(*backend, head_size));

  log_debug("Using diffusion attention backend " + name + " on " + f.device);
  return PlatformDecision{name, {}};
}

}  // namespace diffattn
