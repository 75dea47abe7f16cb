#pragma once
// Page-locked host memory for data that crosses to or from the GPU on every call, kept for the
// process: pinning a few hundred megabytes per call would cost more than the faster copy saves.
// Each holder takes an idle buffer at least as large as it needs (the smallest such), or pins a
// new one; concurrent calls hold separate buffers. Buffers are never unpinned while the process
// runs (a call that needs more than every idle buffer holds unpins those first), so the memory
// kept is the largest concurrent need seen.
//
// A holder that enqueues a copy and returns without waiting for it calls hold_until(stream): the
// buffer goes back to the pool with an event recorded behind the copy, and the next holder waits
// for that event before it gets the buffer, so a later call cannot overwrite data still in flight.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace diffattn::cuda {

class PinnedStaging {
 public:
  PinnedStaging() = default;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  // Every copy into or out of the buffer has completed, or is covered by hold_until.
  ~PinnedStaging() {
    if (data_ == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex());
    idle().push_back({data_, bytes_, ready_});
  }

  Status acquire(std::size_t bytes) {
    Block block{};
    {
      std::lock_guard<std::mutex> lock(mutex());
      std::vector<Block>& pool = idle();
      auto best = pool.end();
      for (auto b = pool.begin(); b != pool.end(); ++b)
        if (b->bytes >= bytes && (best == pool.end() || b->bytes < best->bytes)) best = b;
      if (best != pool.end()) {
        block = *best;
        pool.erase(best);
      } else {
        for (const Block& b : pool) {
          wait_for(b);
          (void)cudaFreeHost(b.data);
        }
        pool.clear();
      }
    }
    if (block.data != nullptr) {
      wait_for(block);
      data_ = block.data;
      bytes_ = block.bytes;
      return Status::Ok();
    }
    void* data = nullptr;
    DIFFATTN_RETURN_IF_ERROR(
        cuda_status(cudaMallocHost(&data, bytes), "cudaMallocHost(" + std::to_string(bytes) + " bytes)"));
    data_ = data;
    bytes_ = bytes;
    return Status::Ok();
  }

  // The buffer is not handed to another holder before `stream` has done the work enqueued on it so
  // far. Call it on the stream's device, after enqueuing the copies. Where the event cannot be
  // recorded the stream is waited for here instead.
  Status hold_until(cudaStream_t stream) {
    cudaError_t err = ready_ != nullptr ? cudaSuccess : cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventRecord(ready_, stream);
    if (err == cudaSuccess) return Status::Ok();
    (void)cudaStreamSynchronize(stream);
    return cuda_status(err, "recording when the GPU is done with a page-locked staging buffer");
  }

  template <typename T>
  T* as(std::size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + byte_offset);
  }

 private:
  struct Block {
    void* data;
    std::size_t bytes;
    cudaEvent_t ready;  // recorded behind the last copy that used the buffer, or null
  };
  // The event is released once waited for: the next holder may run on another device.
  static void wait_for(const Block& b) {
    if (b.ready == nullptr) return;
    (void)cudaEventSynchronize(b.ready);
    (void)cudaEventDestroy(b.ready);
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<Block>& idle() {
    static auto* pool = new std::vector<Block>();  // outlives the CUDA context: never destroyed
    return *pool;
  }

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  cudaEvent_t ready_ = nullptr;
};

}  // namespace diffattn::cuda
