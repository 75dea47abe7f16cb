#pragma once
// The device memory pool of diffattn's own that every CUDA workspace comes from (split partials,
// packed masks, quantized copies, the sparse backends' tile-order copies and lists): one per device,
// created on first use, leaving the caller's default pool alone. The default pool would hand its
// memory back at every synchronisation, so a call that needs gigabytes (a sparse pass over a 720p
// video) would map them afresh each time; this one keeps up to a sixteenth of the device's memory
// (at least 256 MiB) cached between calls, as a caching allocator does. Allocations that fail are
// retried once after the pool gives back all it caches.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace diffattn::cuda {

// The current device's pool; nullptr when the device has no memory-pool support.
inline cudaMemPool_t workspace_pool() {
  constexpr int kMaxDevices = 64;
  static std::mutex mu;
  static cudaMemPool_t pools[kMaxDevices] = {};
  static bool tried[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!tried[device]) {
    tried[device] = true;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    if (cudaMemPoolCreate(&pool, &props) == cudaSuccess) {
      std::size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
      std::uint64_t keep = std::max<std::uint64_t>(std::uint64_t{256} << 20, total_bytes / 16);
      (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
      pools[device] = pool;
    } else {
      (void)cudaGetLastError();
    }
  }
  return pools[device];
}

// `bytes` on `stream` from the pool (the default pool where there is none); on failure, the pool's
// cached memory is given back and the allocation tried once more.
inline cudaError_t workspace_alloc(void** ptr, std::size_t bytes, cudaStream_t stream) {
  cudaMemPool_t pool = workspace_pool();
  if (pool == nullptr) return cudaMallocAsync(ptr, bytes, stream);
  cudaError_t e = cudaMallocFromPoolAsync(ptr, bytes, pool, stream);
  if (e != cudaErrorMemoryAllocation) return e;
  (void)cudaGetLastError();
  (void)cudaMemPoolTrimTo(pool, 0);
  return cudaMallocFromPoolAsync(ptr, bytes, pool, stream);
}

}  // namespace diffattn::cuda
