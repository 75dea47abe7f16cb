// Default CUDA routing (docs/design/selection_contract.md), first compatible wins:
//   1 TRTLLM_ATTN  datacenter Blackwell, model allows it, head 128, trtllm-gen present
//   2 CUDNN_ATTN   Blackwell with cuDNN >= 9.5 and a cuDNN head size
//   3 FLASHINFER   Blackwell with FlashInfer's prefill kernels and head 64/128/256
//   4 (Blackwell with an old cuDNN: warn and continue)
//   5 FLASH_ATTN   when this device has FLASH_ATTN kernels (FA4-class only on Blackwell)
//   6 TORCH_SDPA
// CUDNN_ATTN and FLASHINFER_ATTN are never chosen automatically before Blackwell.

#include <optional>
#include <string>
#include <vector>

#include "diffattn/log.h"
#include "platform/backend_checks.h"
#include "platform/cudnn_version.h"
#include "platform/cuda_platform.h"

namespace diffattn {
namespace {

using Reason = std::optional<std::string>;

std::string head_text(int head_size) { return head_size > 0 ? std::to_string(head_size) : "unknown"; }

Reason trtllm_default_blocker(const CudaFacts& f, int head_size, bool allow_trtllm_default) {
  if (!f.datacenter_blackwell) return "datacenter Blackwell (SM100 / SM103) only; this is " + f.sm;
  if (!allow_trtllm_default) {
    return "the model does not declare a mask-free attention path (allow_trtllm_default is false)";
  }
  if (head_size != 128) return "head_size " + head_text(head_size) + " != 128";
  if (!f.trtllm_gen) return "the trtllm-gen FMHA kernels are not available";
  return std::nullopt;
}

Reason cudnn_default_blocker(const CudaFacts& f, int head_size) {
  if (!f.cudnn_present) return std::string("no cuDNN library found");
  if (!f.cudnn_blackwell_ready) {
    return "cuDNN " + cudnn_version_string(f.cudnn_version) + " < 9.5 has no tuned Blackwell fused attention";
  }
  if (head_size > 0 && !cudnn_supports_head_size(head_size)) {
    return "head_dim " + std::to_string(head_size) + " is outside cuDNN fused attention (multiples of 8, 8-256)";
  }
  return std::nullopt;
}

Reason flashinfer_default_blocker(const CudaFacts& f, int head_size) {
  if (!f.flashinfer) return std::string("FlashInfer is not available");
  if (!f.flashinfer_prefill) return std::string("the FlashInfer build lacks BatchPrefillWithRaggedKVCacheWrapper");
  if (!flashinfer_supports_head_size(head_size)) return "head_size " + head_text(head_size) + " is not 64, 128 or 256";
  return std::nullopt;
}

Reason flash_attn_default_blocker(const CudaFacts& f, const BackendDescriptor& backend, int head_size) {
  if (f.flash_attn_unsupported) return f.flash_attn_unsupported;
  if (head_size > 0 && !backend.caps.supports_head_size(head_size)) {
    return "head_size " + std::to_string(head_size) + " is not compiled (compiled: " + backend.caps.head_size_rule() +
           ")";
  }
  return std::nullopt;
}

}  // namespace

Result<PlatformDecision> CudaPlatform::choose_default(int head_size, bool allow_trtllm_default) const {
  const CudaFacts& f = facts_;
  std::vector<Considered> considered;
  // A candidate is taken when neither the routing nor the registry (unregistered, unavailable)
  // objects; the routing's reason is the more specific one, so it is recorded first.
  auto take = [&](const std::string& name, Reason routing_blocker) {
    Reason blocker = std::move(routing_blocker);
    if (!blocker) blocker = platform_checks::default_blocker(registry_, info_, name);
    if (!blocker) return true;
    considered.push_back({name, *blocker});
    return false;
  };
  auto decide = [&](const std::string& name, const std::string& why) {
    log_info("Defaulting to diffusion attention backend " + name + " (" + why + ")");
    return PlatformDecision{name, considered};
  };

  if (f.blackwell) {
    if (!f.known_blackwell_sku) {
      log_info("Detected Blackwell-class GPU " + f.sm + " (untested variant); routing as Blackwell.");
    }
    if (take("TRTLLM_ATTN", trtllm_default_blocker(f, head_size, allow_trtllm_default))) {
      return decide("TRTLLM_ATTN", "datacenter Blackwell " + f.sm + ", head_dim " + head_text(head_size));
    }
    if (take("CUDNN_ATTN", cudnn_default_blocker(f, head_size))) {
      return decide("CUDNN_ATTN", "Blackwell " + f.sm + ", cuDNN " + cudnn_version_string(f.cudnn_version) +
                                      ", head_dim " + head_text(head_size));
    }
    if (take("FLASHINFER_ATTN", flashinfer_default_blocker(f, head_size))) {
      return decide("FLASHINFER_ATTN", "Blackwell " + f.sm + ", head_dim " + head_text(head_size));
    }
    if (!f.cudnn_blackwell_ready) {
      log_warning("Detected Blackwell " + f.sm + " but cuDNN " + cudnn_version_string(f.cudnn_version) +
                  " < 9.5: no tuned Blackwell fused attention. Automatic selection continues with FLASH_ATTN "
                  "(FA4-class kernels) when available, otherwise TORCH_SDPA.");
    }
  }

  Result<const BackendDescriptor*> flash = registry_.find("FLASH_ATTN");
  if (take("FLASH_ATTN", flash.ok() ? flash_attn_default_blocker(f, **flash, head_size) : std::nullopt)) {
    return decide("FLASH_ATTN", f.sm + (f.blackwell ? ", FA4-class kernels" : "") + ", head_dim " +
                                    head_text(head_size));
  }

  Result<const BackendDescriptor*> sdpa = registry_.find("TORCH_SDPA");
  Reason sdpa_head;
  if (sdpa.ok() && head_size > 0 && !(*sdpa)->caps.supports_head_size(head_size)) {
    sdpa_head = "head_size " + std::to_string(head_size) + " is outside " + (*sdpa)->caps.head_size_rule();
  }
  if (take("TORCH_SDPA", sdpa_head)) {
    log_debug("Defaulting to diffusion attention backend TORCH_SDPA on " + f.device);
    return PlatformDecision{"TORCH_SDPA", considered};
  }
  std::string reasons;
  for (const Considered& c : considered) reasons += (reasons.empty() ? "" : "; ") + c.backend + ": " + c.reason;
  return Unsupported("No diffusion attention backend can run head_size=" + head_text(head_size) + " on " + f.device +
                     " (" + reasons + "). Choose a head size TORCH_SDPA supports, or register a backend that runs it.");
}

}  // namespace diffattn
