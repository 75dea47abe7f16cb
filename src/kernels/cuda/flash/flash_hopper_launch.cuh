#pragma once
// TMA descriptors and the launch of one Hopper kernel instantiation (traits T). Included by the
// dispatch ladder in flash_hopper.cu and by the development harness, which times tile variants.

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_fwd_hopper.cuh"
#include "kernels/cuda/flash/flash_hopper.h"

namespace diffattn::flash {
namespace hopper_detail {


using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver entry point is fetched through the runtime so the library need not link libcuda.
inline EncodeTiledFn encode_tiled_fn() {
  static EncodeTiledFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult query{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &query) !=
            cudaSuccess ||
        query != cudaDriverEntryPointSuccess)
      ptr = nullptr;
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

inline LaunchStatus fail(LaunchStatus::Code code, std::string message) { return {code, std::move(message)}; }

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

inline LaunchStatus make_map(CUtensorMap* map, const char* name, const void* base, bool bf16, int head_size,
                      std::int64_t rows, std::int64_t heads, std::int64_t batch, const std::int64_t (&stride)[3],
                      int box_rows) {
  EncodeTiledFn encode = encode_tiled_fn();
  if (encode == nullptr)
    return fail(LaunchStatus::kCudaError,
                "FLASH_ATTN: the CUDA driver does not provide cuTensorMapEncodeTiled (needs a CUDA 12+ driver); "
                "update the driver or select CUDNN_ATTN / TORCH_SDPA");
  if (!aligned16(base))
    return fail(LaunchStatus::kInvalidInput,
                std::string("FLASH_ATTN: ") + name + " data must be 16-byte aligned for TMA; pass an aligned tensor");
  for (int i = 0; i < 3; ++i) {
    if ((stride[i] * 2) % 16 != 0)
      return fail(LaunchStatus::kInvalidInput,
                  std::string("FLASH_ATTN: ") + name + " batch/sequence/head strides must be multiples of 8 elements "
                  "(16 bytes) for TMA; got strides (" + std::to_string(stride[0]) + ", " + std::to_string(stride[1]) +
                  ", " + std::to_string(stride[2]) + "); make the tensor contiguous first");
  }
  if (!fits_tma_coordinates(rows) || !fits_tma_coordinates(heads) || !fits_tma_coordinates(batch))
    return fail(LaunchStatus::kInvalidInput, std::string("FLASH_ATTN: ") + name + " extents exceed 2^31 rows");
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_size), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  // TMA strides are in bytes and exclude the innermost (contiguous) dimension.
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(stride[1] * 2), static_cast<cuuint64_t>(stride[2] * 2),
                                 static_cast<cuuint64_t>(stride[0] * 2)};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                            const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return fail(LaunchStatus::kCudaError, std::string("FLASH_ATTN: cuTensorMapEncodeTiled failed for ") + name +
                                              " (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  return {};
}

// Builds the TMA maps for `args` and launches the kernel of traits T.
template <class T>
LaunchStatus launch_with_traits(const HopperArgs& args, cudaStream_t stream) {
  constexpr int kD = T::kD;
  constexpr bool kBf16 = T::kBf16;
  FlashParams p = args.params;
  p.out_vec16 = reinterpret_cast<std::uintptr_t>(p.out) % 16 == 0 && p.out_stride_b % 8 == 0 &&
                p.out_stride_s % 8 == 0 && p.out_stride_h % 8 == 0;
  p.num_m_blocks = static_cast<int>(ceil_div(p.seqlen_q, T::kBlockM));
  const std::int64_t tiles = num_tiles(p.batch, p.heads_q, p.num_m_blocks);
  if (tiles >= (std::int64_t{1} << 31))
    return fail(LaunchStatus::kInvalidInput, "FLASH_ATTN: more than 2^31 query tiles; split the batch");
  p.num_tiles = static_cast<int>(tiles);
  if (p.num_tiles == 0) return {};

  FlashTmaMaps maps;
  LaunchStatus s = make_map(&maps.q, "q", args.q, kBf16, kD, args.q_rows, p.heads_q, args.tma_batch, args.q_stride,
                            T::kBlockM);
  if (!s.ok()) return s;
  s = make_map(&maps.k, "k", args.k, kBf16, kD, args.kv_rows, p.heads_kv, args.tma_batch, args.k_stride, T::kBlockN);
  if (!s.ok()) return s;
  s = make_map(&maps.v, "v", args.v, kBf16, kD, args.kv_rows, p.heads_kv, args.tma_batch, args.v_stride, T::kBlockN);
  if (!s.ok()) return s;
  // TMA stores need unpacked batches (a packed tile's rows may run into the next sequence, which
  // the map cannot clip) and 16-byte rows; otherwise the kernel stores with its own instructions.
  p.out_tma = false;
  if constexpr (T::kTmaStore) {
    if (p.out_vec16 && p.cu_seqlens_q == nullptr) {
      const std::int64_t out_stride[3] = {p.out_stride_b, p.out_stride_s, p.out_stride_h};
      s = make_map(&maps.o, "out", p.out, kBf16, kD, p.seqlen_q, p.heads_q, p.batch, out_stride, 64);
      if (!s.ok()) return s;
      p.out_tma = true;
    }
  }

  auto kernel = flash_fwd_hopper_kernel<T>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (e != cudaSuccess)
    return fail(LaunchStatus::kCudaError, std::string("FLASH_ATTN: cannot reserve shared memory: ") + cudaGetErrorString(e));
  const int grid = persistent_grid(p.num_tiles, args.sm_count);
  kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(maps, p);
  e = cudaGetLastError();
  if (e != cudaSuccess)
    return fail(LaunchStatus::kCudaError, std::string("FLASH_ATTN: kernel launch failed: ") + cudaGetErrorString(e));
  return {};
}

}  // namespace hopper_detail
}  // namespace diffattn::flash
