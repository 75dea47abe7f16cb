#pragma once
// CUDA runtime errors as diffattn errors that name the failing call.

#include <cuda_runtime.h>

#include <string>

#include "diffattn/status.h"

namespace diffattn::cuda {

inline Status cuda_status(cudaError_t err, const std::string& call) {
  if (err == cudaSuccess) return Status::Ok();
  return CudaError(call + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// The launch itself and the configuration errors it reports without a device sync.
inline Status check_launch(const std::string& kernel) {
  return cuda_status(cudaGetLastError(), "launching " + kernel);
}

}  // namespace diffattn::cuda

#define DIFFATTN_CUDA_RETURN_IF_ERROR(call) DIFFATTN_RETURN_IF_ERROR(::diffattn::cuda::cuda_status((call), #call))
