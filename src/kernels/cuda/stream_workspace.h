#pragma once
// One device allocation for a call's intermediates, stream-ordered from diffattn's workspace pool
// (kernels/cuda/workspace_pool.h, which keeps it cached for the next call) and handed back on the
// stream, so that the call stays capturable in a CUDA graph. Parts are placed first (place), the
// whole allocated once (allocate), then read back by offset (at).

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "diffattn/status.h"
#include "kernels/cuda/workspace_pool.h"

namespace diffattn::cuda {

class StreamWorkspace {
 public:
  explicit StreamWorkspace(cudaStream_t stream) : stream_(stream) {}
  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;
  ~StreamWorkspace() {
    if (base_ != nullptr) (void)cudaFreeAsync(base_, stream_);
  }

  // The offset of a part of `bytes`, 256-byte aligned.
  std::size_t place(std::size_t bytes) {
    const std::size_t offset = total_;
    total_ += (bytes + 255) / 256 * 256;
    return offset;
  }

  // `owner` names the backend and `holds` what the workspace carries, for the error.
  Status allocate(const std::string& owner, const std::string& holds) {
    const cudaError_t e = workspace_alloc(&base_, total_ > 0 ? total_ : 1, stream_);
    if (e == cudaSuccess) return Status::Ok();
    (void)cudaGetLastError();
    base_ = nullptr;
    return CudaError(owner + " on CUDA cannot allocate its " + std::to_string(total_ >> 20) + " MiB workspace (" +
                     holds + "): " + cudaGetErrorString(e) + "; free device memory or run fewer sequences per call");
  }

  template <typename T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(base_) + offset);
  }

 private:
  cudaStream_t stream_;
  void* base_ = nullptr;
  std::size_t total_ = 0;
};

}  // namespace diffattn::cuda
