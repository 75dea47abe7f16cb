#pragma once
// Platforms described in code for routing tests: one per architecture the CUDA rules distinguish.

#include <string>

#include "diffattn/platform.h"

namespace diffattn::testing {

struct CudaDescription {
  int major = 9, minor = 0;
  int cudnn_version = 91900;
  bool flash_attn = false;
  bool flash_attn_4 = false;
  std::string flashinfer;  // version; empty: absent
  bool flashinfer_prefill = false;
  bool trtllm_gen = false;
  bool sage_attn = false;
  bool sage_attn_3 = false;
};

inline PlatformInfo described_cuda(const CudaDescription& d) {
  PlatformInfo info;
  info.kind = PlatformKind::kCuda;
  info.cc_major = d.major;
  info.cc_minor = d.minor;
  info.device_name = "described sm_" + std::to_string(d.major) + std::to_string(d.minor);
  info.cudnn_version = d.cudnn_version;
  info.features.flash_attn = d.flash_attn;
  info.features.flash_attn_4 = d.flash_attn_4;
  info.features.flashinfer = d.flashinfer;
  info.features.flashinfer_prefill = d.flashinfer_prefill;
  info.features.trtllm_gen = d.trtllm_gen;
  info.features.sage_attn = d.sage_attn;
  info.features.sage_attn_3 = d.sage_attn_3;
  info.origin = "test";
  return info;
}

// A device with this build's kernels where they exist (FLASH_ATTN on 8.x and 9.0, SAGE_ATTN on 9.0)
// and no optional libraries: what a probe of this build reports.
inline PlatformInfo probed_like(int major, int minor, int cudnn_version = 91900) {
  CudaDescription d;
  d.major = major;
  d.minor = minor;
  d.cudnn_version = cudnn_version;
  d.flash_attn = major == 8 || (major == 9 && minor == 0);
  d.sage_attn = major == 8 || (major == 9 && minor == 0);
  // FLASHINFER_ATTN runs on FLASH_ATTN's kernels: the probe reports them as the prefill kernels.
  if (d.flash_attn) {
    d.flashinfer = kDiffattnPrefillKernels;
    d.flashinfer_prefill = true;
  }
  return described_cuda(d);
}

inline PlatformInfo described_cpu() {
  PlatformInfo info;
  info.kind = PlatformKind::kCpu;
  info.device_name = "x86_64, AVX2";
  info.origin = "test";
  return info;
}

inline std::string platform_file(const std::string& name) {
  return std::string(DIFFATTN_TEST_DATA_DIR) + "/platforms/" + name;
}

}  // namespace diffattn::testing
