#pragma once
// Launches one instantiation of the tensor-core kernel. Instantiated once per (dtype, head-dim
// bucket) in sdpa_mma_d*.cu; the dispatch ladder in sdpa_dispatch.cu picks among them.

#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dense/sdpa_mma_kernel.cuh"
#include "kernels/cuda/dense/sdpa_params.h"
#include "kernels/cuda/dense/tile_config.h"

namespace diffattn::cuda {

template <typename T>
constexpr const char* mma_dtype_name() {
  return std::is_same_v<T, __half> ? "float16" : "bfloat16";
}

// Raises a kernel's dynamic shared-memory limit once per device (the attribute is per device).
template <typename Kernel>
Status allow_dynamic_smem(Kernel kernel, std::size_t bytes, std::atomic<unsigned long long>& done_devices,
                          const std::string& name) {
  int device = 0;
  DIFFATTN_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  const unsigned long long bit = 1ull << (device % 64);
  if (done_devices.load(std::memory_order_acquire) & bit) return Status::Ok();
  DIFFATTN_RETURN_IF_ERROR(cuda_status(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "cudaFuncSetAttribute(" + name + ", MaxDynamicSharedMemorySize=" + std::to_string(bytes) + ")"));
  done_devices.fetch_or(bit, std::memory_order_acq_rel);
  return Status::Ok();
}

// kListTile > 0: the block-sparse walk over lists of kListTile x kListTile tiles (SdpaParams::bs_*).
template <typename T, int kD, int kBlockN, int kWarps, int kMTiles, int kListTile = 0>
Status launch_mma_tile(const SdpaParams& p, cudaStream_t stream) {
  using Tile = MmaTile<T, kD, kBlockN, kWarps, kMTiles>;
  static std::atomic<unsigned long long> smem_ready{0};
  const std::string name = std::string("sdpa_mma_kernel<") + mma_dtype_name<T>() + ", d" + std::to_string(kD) +
                           ", n" + std::to_string(kBlockN) + ", w" + std::to_string(kWarps) +
                           ", m" + std::to_string(kMTiles) +
                           (kListTile > 0 ? ", listed " + std::to_string(kListTile) : std::string()) + ">";
  auto kernel = sdpa_mma_kernel<T, kD, kBlockN, kWarps, kMTiles, kListTile>;
  DIFFATTN_RETURN_IF_ERROR(allow_dynamic_smem(kernel, Tile::kSmemBytes, smem_ready, name));
  const dim3 grid(ceil_div(p.seqlen_q, Tile::kBlockM), p.heads_q, p.batch);
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(p);
  return check_launch(name);
}

template <typename T, int kD>
Status launch_mma_bucket(const SdpaParams& p, cudaStream_t stream) {
  constexpr TileConfig c = tile_config_for_bucket(kD);
  return launch_mma_tile<T, kD, c.block_n, c.warps, c.m_tiles>(p, stream);
}

// The block-sparse walk over lists of kListTile x kListTile tiles (block_sparse_tile_config).
template <typename T, int kD, int kListTile>
Status launch_mma_block_sparse(const SdpaParams& p, cudaStream_t stream) {
  constexpr TileConfig c = block_sparse_tile_config(kD, kListTile);
  static_assert(c.block_m == kListTile, "block_sparse_tile_config gives one CTA per list tile");
  return launch_mma_tile<T, kD, c.block_n, c.warps, c.m_tiles, kListTile>(p, stream);
}

}  // namespace diffattn::cuda
