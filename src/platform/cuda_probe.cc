#include <string>
#include <vector>

#include "diffattn/platform.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>
#include <cudnn.h>
#endif

namespace diffattn {

#if DIFFATTN_HAVE_CUDA
namespace {

// The architectures this build compiles diffattn's kernels for (cmake/Cuda.cmake).
const std::vector<std::string> kCompiledArchs = {"sm_80", "sm_90a"};

// sm_80 SASS runs on every 8.x device (and its PTX JIT-compiles there); sm_90a only on 9.0.
bool flash_attn_built_for(int major, int minor) { return major == 8 || (major == 9 && minor == 0); }

// SAGE_ATTN's kernels: the Hopper kernel on sm_90, the Ampere/Ada kernel on sm_80-sm_89 (FP8 P*V from sm_89)
// (kernels/cuda/sage/run_sage_attn.h answers the same for the kernels layer, which the platform may
// not include).
bool sage_attn_built_for(int major, int minor) { return major == 8 || (major == 9 && minor == 0); }

}  // namespace

Result<PlatformInfo> probe_cuda_platform(int device) {
  int count = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&count);
  if (count_error != cudaSuccess || count == 0) {
    return Unavailable("no CUDA device found (cudaGetDeviceCount: " +
                       std::string(count_error == cudaSuccess ? "0 devices" : cudaGetErrorString(count_error)) +
                       "). Use --platform cpu, or describe a GPU with --platform FILE.json.");
  }
  if (device < 0 || device >= count) {
    return InvalidConfig("CUDA device " + std::to_string(device) + " does not exist; this machine has " +
                         std::to_string(count) + " (0.." + std::to_string(count - 1) + ").");
  }
  cudaDeviceProp prop{};
  const cudaError_t prop_error = cudaGetDeviceProperties(&prop, device);
  if (prop_error != cudaSuccess) {
    return CudaError("cudaGetDeviceProperties(" + std::to_string(device) + ") failed: " +
                     cudaGetErrorString(prop_error));
  }
  PlatformInfo info;
  info.kind = PlatformKind::kCuda;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.device_name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  // The loaded library's version, not the header's: that is what runs.
  info.cudnn_version = static_cast<int>(cudnnGetVersion());
  info.compiled_archs = kCompiledArchs;
  info.features.flash_attn = flash_attn_built_for(prop.major, prop.minor);
  info.features.sage_attn = sage_attn_built_for(prop.major, prop.minor);
  // FLASHINFER_ATTN's ragged prefill and mask kernels are FLASH_ATTN's: they exist where those do.
  if (info.features.flash_attn) {
    info.features.flashinfer = kDiffattnPrefillKernels;
    info.features.flashinfer_prefill = true;
  }
  info.origin = "probe";
  return info;
}

#else

Result<PlatformInfo> probe_cuda_platform(int) {
  return Unavailable(
      "no CUDA device can be probed: this diffattn build has no CUDA support (nvcc was not found at configure "
      "time). Use --platform cpu, describe a GPU with --platform FILE.json, or rebuild with the CUDA toolkit.");
}

#endif

}  // namespace diffattn
