#include "platform/cuda_facts.h"

namespace diffattn {
namespace {

std::string compiled_archs_text(const PlatformInfo& info) {
  std::string out;
  for (const std::string& arch : info.compiled_archs) out += (out.empty() ? "" : ", ") + arch;
  return out.empty() ? "features.flash_attn is false" : "this build holds kernels for " + out;
}

std::optional<std::string> flash_attn_unsupported_reason(const PlatformInfo& info, bool blackwell) {
  if (blackwell) {
    if (info.features.flash_attn_4) return std::nullopt;
    return "Blackwell requires an FA4-class kernel, which this build does not hold; diffattn's FA2/FA3-class "
           "kernels are for Hopper and Ampere/Ada only";
  }
  if (info.capability() < 80) return "compute capability < 8.0";
  if (!info.features.flash_attn) {
    return "no FLASH_ATTN kernels are built for " + info.sm_string() + " (" + compiled_archs_text(info) + ")";
  }
  return std::nullopt;
}

}  // namespace

CudaFacts cuda_facts(const PlatformInfo& info) {
  CudaFacts f;
  f.major = info.cc_major;
  f.minor = info.cc_minor;
  f.sm = info.sm_string();
  f.device = info.describe();
  f.compute_supported = info.capability() >= 80;
  f.blackwell = f.major == 10 || f.major == 11 || f.major == 12;
  f.datacenter_blackwell = f.major == 10;
  const int cc = info.capability();
  f.known_blackwell_sku = cc == 100 || cc == 103 || cc == 120 || cc == 121;
  f.flash_attn_unsupported = flash_attn_unsupported_reason(info, f.blackwell);
  f.cudnn_version = info.cudnn_version;
  f.cudnn_present = info.cudnn_version > 0;
  f.cudnn_blackwell_ready = info.cudnn_version >= 90500;
  f.flashinfer = !info.features.flashinfer.empty();
  f.flashinfer_prefill = f.flashinfer && info.features.flashinfer_prefill;
  f.trtllm_gen = info.features.trtllm_gen;
  return f;
}

bool cudnn_supports_head_size(int head_size) { return head_size > 0 && head_size <= 256 && head_size % 8 == 0; }

bool flashinfer_supports_head_size(int head_size) {
  return head_size == 64 || head_size == 128 || head_size == 256;
}

std::string cuda_suggestion(const CudaFacts& facts) {
  if (facts.blackwell) return "CUDNN_ATTN or TORCH_SDPA";
  if (facts.compute_supported) return "FLASH_ATTN or TORCH_SDPA";
  return "TORCH_SDPA";
}

}  // namespace diffattn
