#pragma once
// TMA maps and the launch of one SAGE_ATTN Hopper instantiation; included by the two translation
// units that instantiate the FP8 and FP16 P*V kernels (compiled in parallel).

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "diffattn/status.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_hopper_launch.cuh"
#include "kernels/cuda/sage/sage_config.h"
#include "kernels/cuda/sage/sage_fwd_hopper.cuh"
#include "kernels/cuda/sage/sage_params.h"
#include "kernels/cuda/workspace_pool.h"

namespace diffattn::sage {

// A 4-D map over (inner, rows, heads, batch) with byte strides and a (box_inner, box_rows) box.
inline Status encode_map(const char* who, CUtensorMap* map, const char* name, CUtensorMapDataType type, const void* base,
                         const std::uint64_t (&dims)[4], const std::uint64_t (&byte_strides)[3], int box_inner,
                         int box_rows, CUtensorMapSwizzle swizzle) {
  auto encode = flash::hopper_detail::encode_tiled_fn();
  if (encode == nullptr)
    return CudaError(std::string(who) + ": the CUDA driver does not provide cuTensorMapEncodeTiled (needs a CUDA 12+ "
                     "driver); update the driver or select FLASH_ATTN");
  for (std::uint64_t s : byte_strides)
    if (s % 16 != 0)
      return InvalidInput(std::string(who) + ": " + name + "'s batch/sequence/head strides must be multiples of 16 "
                          "bytes; make the tensor contiguous first");
  const cuuint64_t d[4] = {dims[0], dims[1], dims[2], dims[3]};
  const cuuint64_t st[3] = {byte_strides[0], byte_strides[1], byte_strides[2]};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_inner), static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t elem[4] = {1, 1, 1, 1};
  const CUresult r = encode(map, type, 4, const_cast<void*>(base), d, st, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return CudaError(std::string(who) + ": cuTensorMapEncodeTiled failed for " + name + " (CUresult " +
                     std::to_string(static_cast<int>(r)) + ")");
  return Status::Ok();
}

// One persistent launch of the attention kernel over p's work items.
template <class T>
Status launch_sage_kernel(const SageTmaMaps& maps, const SageParams& p, int sm_count, cudaStream_t stream) {
  constexpr const char* who = T::kQk16 ? kQk16V8Name : kSageName;
  auto kernel = sage_fwd_hopper_kernel<T>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (e != cudaSuccess) return CudaError(std::string(who) + ": cannot reserve shared memory: " + cudaGetErrorString(e));
  const int items = T::kSplit ? p.num_items : p.num_tiles;
  // A dependent launch: its prologue overlaps the K/V pass's last blocks (it waits for them before it
  // reads anything the quantization wrote).
  e = cuda::launch_maybe_dependent(true, kernel, dim3(flash::persistent_grid(items, sm_count)), dim3(T::kThreads),
                                   T::kSmemBytes, stream, maps, p);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) return CudaError(std::string(who) + ": kernel launch failed: " + cudaGetErrorString(e));
  return Status::Ok();
}

template <class T>
Status launch_sage_hopper(SageParams p, int sm_count, cudaStream_t stream) {
  if constexpr (!T::kWalk && !T::kListed)
    if (p.kv_walk != nullptr) return launch_sage_hopper<typename T::Walk>(p, sm_count, stream);
  if constexpr (!T::kKvInKernel && sage_kv_in_kernel_fits(T::kConsumers, T::kPvFp8, !T::kQk16, T::kListed || T::kWalk))
    if (p.kv_ready != nullptr) return launch_sage_hopper<typename T::KvInKernel>(p, sm_count, stream);
  if (p.kv_ready != nullptr && !T::kKvInKernel)  // the launcher asked for a kernel that has no such variant
    return Internal(std::string(T::kQk16 ? kQk16V8Name : kSageName) +
                    ": K and V were left for the attention kernel, but this kernel cannot quantize them");
  constexpr int D = T::kD;
  constexpr const char* who = T::kQk16 ? kQk16V8Name : kSageName;
  SageTmaMaps maps;
  const auto sw = D == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const std::uint64_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seqlen_q, Skv = p.seqlen_k;
  const auto dtype16 = T::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const std::uint64_t es = 2;
  if constexpr (T::kQk16) {
    // The caller's Q and K in 64-column boxes (128 bytes, 128-byte swizzle).
    DIFFATTN_RETURN_IF_ERROR(encode_map(who, &maps.q, "q", dtype16, p.q, {D, Sq, Hq, B},
                                        {static_cast<std::uint64_t>(p.q_stride_s) * es,
                                         static_cast<std::uint64_t>(p.q_stride_h) * es,
                                         static_cast<std::uint64_t>(p.q_stride_b) * es},
                                        64, T::kBlockM, CU_TENSOR_MAP_SWIZZLE_128B));
    DIFFATTN_RETURN_IF_ERROR(encode_map(who, &maps.k, "k", dtype16, p.k, {D, Skv, Hkv, B},
                                        {static_cast<std::uint64_t>(p.k_stride_s) * es,
                                         static_cast<std::uint64_t>(p.k_stride_h) * es,
                                         static_cast<std::uint64_t>(p.k_stride_b) * es},
                                        64, T::kBlockN, CU_TENSOR_MAP_SWIZZLE_128B));
  } else {
    if constexpr (!T::kFusedQ)  // else the kernel reads the caller's Q itself
      DIFFATTN_RETURN_IF_ERROR(encode_map(who, &maps.q, "quantized q", CU_TENSOR_MAP_DATA_TYPE_UINT8, p.q_int8,
                                          {D, Sq, Hq, B}, {D, Sq * D, Hq * Sq * D}, D, T::kBlockM, sw));
    DIFFATTN_RETURN_IF_ERROR(encode_map(who, &maps.k, "quantized k", CU_TENSOR_MAP_DATA_TYPE_UINT8, p.k_int8,
                                        {D, Skv, Hkv, B}, {D, Skv * D, Hkv * Skv * D}, D, T::kBlockN, sw));
  }
  if constexpr (T::kPvFp8) {
    const std::uint64_t P = p.kv_padded;
    DIFFATTN_RETURN_IF_ERROR(encode_map(who, &maps.v, "quantized v", CU_TENSOR_MAP_DATA_TYPE_UINT8, p.v_e4m3, {P, D, Hkv, B},
                                        {P, D * P, Hkv * D * P}, T::kBlockN, D, CU_TENSOR_MAP_SWIZZLE_128B));
  } else {
    DIFFATTN_RETURN_IF_ERROR(encode_map(
        who, &maps.v, "v", dtype16, p.v,
        {D, Skv, Hkv, B},
        {static_cast<std::uint64_t>(p.v_stride_s) * es, static_cast<std::uint64_t>(p.v_stride_h) * es,
         static_cast<std::uint64_t>(p.v_stride_b) * es},
        64, T::kBlockN, CU_TENSOR_MAP_SWIZZLE_128B));
  }
  // The in-order groups split a short last wave (sage_config.h) in a launch of their split kernel;
  // without the partials' workspace they run it whole.
  SageTailSplit plan{p.num_tiles, 1, p.num_tiles};
  if constexpr (T::kInOrder && !T::kListed)
    if (!p.causal) plan = sage_tail_split(p.num_tiles, sm_count, flash::ceil_div(p.seqlen_k, T::kBlockN));
  void* split_ws = nullptr;
  if (plan.pieces > 1) {
    const std::size_t rows = static_cast<std::size_t>(plan.items - plan.split_begin) * T::kBlockM;
    const std::size_t o_bytes = rows * T::kD * 4;
    if (cuda::workspace_alloc(&split_ws, o_bytes + rows * 8, stream) != cudaSuccess) {
      (void)cudaGetLastError();
      split_ws = nullptr;
      plan = SageTailSplit{p.num_tiles, 1, p.num_tiles};
    } else {
      p.split_o = static_cast<float*>(split_ws);
      p.split_ml = reinterpret_cast<float*>(static_cast<char*>(split_ws) + o_bytes);
    }
  }
  p.num_items = static_cast<int>(plan.items);
  p.split_begin = static_cast<int>(plan.split_begin);
  p.split_pieces = plan.pieces;
  const Status launched = [&] {
    if constexpr (T::kInOrder && !T::kListed)
      if (plan.pieces > 1) return launch_sage_kernel<typename T::Split>(maps, p, sm_count, stream);
    return launch_sage_kernel<T>(maps, p, sm_count, stream);
  }();
  cudaError_t merged = cudaSuccess;
  if (launched.ok() && plan.pieces > 1) {
    const std::int64_t warps = static_cast<std::int64_t>(p.num_tiles - p.split_begin) * T::kBlockM;
    merged = cuda::launch_maybe_dependent(true, sage_merge_kernel<T>, dim3(static_cast<unsigned>(flash::ceil_div(warps, 8))),
                                          dim3(256), 0, stream, p);
    if (merged == cudaSuccess) merged = cudaGetLastError();
  }
  if (split_ws != nullptr) (void)cudaFreeAsync(split_ws, stream);
  if (merged != cudaSuccess) return CudaError(std::string(who) + ": merge launch failed: " + cudaGetErrorString(merged));
  return launched;
}

// The instantiations of one P*V mode and number of consumer groups: hd64 / hd128 x bf16 / fp16
// (sage_hopper_fp8_g2.cu, sage_hopper_fp8_g3.cu, sage_hopper_fp16_g2.cu, sage_hopper_fp16_g3.cu,
// compiled in parallel). p.num_m_blocks and p.num_tiles count tiles of 64 * consumer_groups rows.
Status launch_sage_hopper_fp8_g2(const SageParams& p, int sm_count, cudaStream_t stream);
Status launch_sage_hopper_fp8_g3(const SageParams& p, int sm_count, cudaStream_t stream);
// Four in-order groups (256-row tiles), hd64 with FP8 P V only: SAGE_ATTN's FP8 mode and QK16/V8
// (sage_hopper_g4.cu). Other head sizes are refused.
Status launch_sage_hopper_fp8_g4(const SageParams& p, int sm_count, cudaStream_t stream);
Status launch_qk16_v8_hopper_g4(const SageParams& p, int sm_count, cudaStream_t stream);
Status launch_sage_hopper_fp16_g2(const SageParams& p, int sm_count, cudaStream_t stream);
Status launch_sage_hopper_fp16_g3(const SageParams& p, int sm_count, cudaStream_t stream);
// The block-sparse walk (two consumer groups, 128 x 128 tiles; p.bs_* set), either P*V mode:
// sage_hopper_listed.cu.
Status launch_sage_hopper_listed(const SageParams& p, bool pv_fp8, int sm_count, cudaStream_t stream);
// FLASHINFER_ATTN's QK16/V8 mode (16-bit Q K^T, FP8 P V): sage_hopper_qk16_g2.cu, sage_hopper_qk16_g3.cu.
Status launch_qk16_v8_hopper_g2(const SageParams& p, int sm_count, cudaStream_t stream);
Status launch_qk16_v8_hopper_g3(const SageParams& p, int sm_count, cudaStream_t stream);

// The three-group FP8 kernel that quantizes Q itself (kFusedQ).
template <int kD, bool kBf16>
using FusedQTraits = SageTraits<kD, kBf16, /*kPvFp8=*/true, 3, /*kQk16=*/false, 0, /*kListed=*/false, /*kSplit=*/false,
                                /*kFusedQ=*/true>;

template <bool kPvFp8, int kConsumers, bool kQk16 = false>
Status launch_sage_hopper_mode(const SageParams& p, int sm_count, cudaStream_t stream) {
  if constexpr (kPvFp8 && kConsumers == 3 && !kQk16) {
    if (p.fused_q && p.head_size == 64)  // the kernel quantizes Q itself (sage_config.h, sage_fuse_q)
      return p.bf16 ? launch_sage_hopper<FusedQTraits<64, true>>(p, sm_count, stream)
                    : launch_sage_hopper<FusedQTraits<64, false>>(p, sm_count, stream);
    if (p.fused_q && p.head_size == 128)
      return p.bf16 ? launch_sage_hopper<FusedQTraits<128, true>>(p, sm_count, stream)
                    : launch_sage_hopper<FusedQTraits<128, false>>(p, sm_count, stream);
  } else if (p.fused_q) {
    return InvalidInput(std::string(kSageName) + ": only the three-group FP8 kernel quantizes Q itself");
  }
  if (p.head_size == 64)
    return p.bf16 ? launch_sage_hopper<SageTraits<64, true, kPvFp8, kConsumers, kQk16>>(p, sm_count, stream)
                  : launch_sage_hopper<SageTraits<64, false, kPvFp8, kConsumers, kQk16>>(p, sm_count, stream);
  if (p.head_size == 128)
    return p.bf16 ? launch_sage_hopper<SageTraits<128, true, kPvFp8, kConsumers, kQk16>>(p, sm_count, stream)
                  : launch_sage_hopper<SageTraits<128, false, kPvFp8, kConsumers, kQk16>>(p, sm_count, stream);
  return Unsupported(std::string(kQk16 ? kQk16V8Name : kSageName) + "'s Hopper kernel has head sizes 64 and 128, not " +
                     std::to_string(p.head_size) + "; select FLASH_ATTN for this layer");
}

}  // namespace diffattn::sage
