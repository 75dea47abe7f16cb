#pragma once
// What the CUDA platform knows about a device and this build, derived once from PlatformInfo.
// Facts only: which backend needs which fact is declared in the backend's folder.

#include <string>

#include "diffattn/platform.h"

namespace diffattn {

struct CudaFacts {
  int capability = 0;  // major * 10 + minor
  std::string sm;      // "sm_90"
  std::string device;  // PlatformInfo::describe()
  int cudnn_version = 0;        // 0: no cuDNN library found
  std::string compiled_archs;   // "this build holds kernels for sm_80, sm_90a" or why none
  PlatformFeatures features;
};

CudaFacts cuda_facts(const PlatformInfo& info);

}  // namespace diffattn
