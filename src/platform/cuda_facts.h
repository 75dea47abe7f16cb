#pragma once
// What the CUDA routing needs to know about a device, derived once from PlatformInfo.

#include <optional>
#include <string>

#include "diffattn/platform.h"

namespace diffattn {

struct CudaFacts {
  int major = 0, minor = 0;
  std::string sm;       // "sm_90"
  std::string device;   // PlatformInfo::describe()
  bool compute_supported = false;     // capability >= 8.0
  bool blackwell = false;             // major 10, 11 or 12
  bool datacenter_blackwell = false;  // major 10: SM100 / SM103
  bool known_blackwell_sku = false;   // 10.0, 10.3, 12.0, 12.1
  std::optional<std::string> flash_attn_unsupported;  // why FLASH_ATTN cannot run, or nullopt
  bool cudnn_present = false;
  bool cudnn_blackwell_ready = false;  // cuDNN >= 9.5
  int cudnn_version = 0;
  bool flashinfer = false;
  bool flashinfer_prefill = false;
  bool trtllm_gen = false;
};

CudaFacts cuda_facts(const PlatformInfo& info);

// cuDNN fused attention: head sizes that are multiples of 8 up to 256, on every GPU.
bool cudnn_supports_head_size(int head_size);
// FlashInfer's prefill kernels: 64, 128, 256.
bool flashinfer_supports_head_size(int head_size);

// The backends worth suggesting instead of a rejected one on this device.
std::string cuda_suggestion(const CudaFacts& facts);

}  // namespace diffattn
