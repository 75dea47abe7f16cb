#pragma once
// Makes a CUDA device current for a scope and restores the caller's device afterwards.

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_check.h"

namespace diffattn::cuda {

class ScopedDevice {
 public:
  ScopedDevice() = default;
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice() {
    if (switched_) (void)cudaSetDevice(previous_);
  }

  Status enter(int device) {
    DIFFATTN_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&previous_), "cudaGetDevice"));
    if (previous_ == device) return Status::Ok();
    DIFFATTN_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")"));
    switched_ = true;
    return Status::Ok();
  }

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace diffattn::cuda
