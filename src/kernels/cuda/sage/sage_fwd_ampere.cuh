#pragma once
// SAGE_ATTN's attention kernel for Ampere and Ada (its 16-bit mode built as compute_80 PTX, so newer
// GPUs run it too; its FP8 mode as compute_89, Ada's FP8 tensor cores), after the quantization
// kernels have written INT8 Q and smoothed INT8 K (and, FP8 mode, V in E4M3 with per-channel
// scales). The arithmetic is kernels/sage/sage_quant.h's: S = Q K^T with mma.sync m16n8k32
// s8*s8 -> s32, each score the INT32 sum times its row's and its key group's INT8 scales, the exact
// online softmax in blocks of keys, then
//  - 16-bit mode (kFp8 false, the accurate mode): blocks of kKGroup keys (one K scale per block),
//    P rounded to the input dtype and multiplied by the caller's V with mma.sync m16n8k16;
//  - FP8 mode: blocks of kKvBlock keys (P is quantized against the block's maximum, as the CPU
//    does), P times 448 rounded to E4M3 and multiplied by the E4M3 V with mma.sync m16n8k32
//    e4m3*e4m3 -> f32 into fresh accumulators per block, added to the output in fp32 (the two-level
//    accumulation: the FP8 tensor cores keep fewer bits than fp32); the row sums are a product of
//    P with a column of ones, so numerator and denominator share P's rounding.
// kQk16 (FLASHINFER_ATTN's QK16/V8 mode, FP8 mode only): Q K^T from the caller's 16-bit Q and K with
// mma.sync m16n8k16 and fp32 sums, times the softmax scale; no INT8, no smoothing.
// FlashAttention-2 tiling: four warps of 16 query rows, K and V double-buffered with cp.async in
// padded rows.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "diffattn/status.h"

#include "kernels/cuda/dense/mma_utils.cuh"
#include "kernels/cuda/sage/sage_params.h"
#include "kernels/sage/sage_quant.h"

namespace diffattn::sage {

template <int kD_, typename T_, bool kFp8_ = false, bool kQk16_ = false>
struct SageAmpereTile {
  using T = T_;
  static constexpr int kD = kD_;
  static constexpr bool kFp8 = kFp8_;
  static constexpr bool kQk16 = kQk16_;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kBlockN = kFp8 ? kKvBlock : kKGroup;  // FP8: P quantized per kKvBlock keys; 16-bit: one K scale per block
  // Bytes per Q or K row (INT8, or kQk16's 16-bit): 16 bytes of padding keep ldmatrix free of bank conflicts.
  static constexpr int kQkPitch = (kQk16 ? 2 : 1) * kD + 16;
  static constexpr int kVPitch = kD + 8;    // elements per 16-bit V row, likewise
  static constexpr int kV8Pitch = kBlockN + 16;  // bytes per E4M3 V channel row (keys along the row), likewise
  static constexpr int kNTiles = kBlockN / 8;  // n8 tiles of the score block
  static constexpr int kDTiles = kD / 8;       // n8 tiles of the output
  static constexpr int kQkSteps = kQk16 ? kD / 16 : kD / 32;  // k16 (16-bit) or k32 (INT8) steps of Q K^T, 32 bytes each
  static constexpr int kPvSteps = kFp8 ? kBlockN / 32 : kBlockN / 16;  // k32 (E4M3) or k16 steps of P V
  static constexpr int kQBytes = kBlockM * kQkPitch;
  static constexpr int kKBytes = kBlockN * kQkPitch;
  static constexpr int kVBytes = kFp8 ? kD * kV8Pitch : kBlockN * kVPitch * 2;
  // kQk16: one K stage (the next block's K loads under this block's softmax and P V), so that hd128
  // stays within Ada's 99 KB of shared memory per block.
  static constexpr int kKStages = kQk16 ? 1 : 2;
  static constexpr int kSmemBytes = kQBytes + kKStages * kKBytes + 2 * kVBytes;
  static_assert(kD == 64 || kD == 128, "SAGE_ATTN's Ampere kernel has hd64 and hd128");
  static_assert(kBlockN % 32 == 0 && kBlockN % kKGroup == 0, "P V steps of 32 keys; whole K scale groups per block");
  static_assert(!kQk16 || kFp8, "QK16/V8 is an FP8 P*V mode");
  static_assert(kSmemBytes <= 99 * 1024, "Ada gives a block at most 99 KB of shared memory");
};

// d += a * b on the FP8 tensor cores (sm_89 and newer); elsewhere the kernel is never launched
// (run_sage_attn.cu checks the device) and traps if it were.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)d, (void)a, (void)b0, (void)b1;
  __trap();
#endif
}

// Four P values as E4M3 (x448 already applied), byte 0 from lo.x: one A register of m16n8k32.
__device__ __forceinline__ std::uint32_t pack_e4m3x4(float a, float b, float c, float d) {
  const std::uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const std::uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return (lo & 0xffffu) | (hi << 16);
}

__device__ __forceinline__ void mma_s8(int (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Rows [row0, row0 + kRows) of an INT8 [rows, kD] matrix into padded shared rows; rows past
// `rows_valid` are zero-filled.
template <class Tile, int kRows>
__device__ __forceinline__ void load_int8_rows(std::uint8_t* smem, const std::int8_t* gmem, int rows_valid, int tid) {
  constexpr int kChunks = Tile::kD / 16;
  for (int idx = tid; idx < kRows * kChunks; idx += Tile::kThreads) {
    const int row = idx / kChunks, chunk = idx % kChunks;
    const bool valid = row < rows_valid;
    cuda::cp_async_16(smem + row * Tile::kQkPitch + chunk * 16, valid ? gmem + row * Tile::kD + chunk * 16 : gmem, valid);
  }
}

// kBlockN rows of the caller's V (row stride `stride` elements, 16-byte aligned) into padded rows.
template <class Tile>
__device__ __forceinline__ void load_v_rows(typename Tile::T* smem, const typename Tile::T* gmem, std::int64_t stride,
                                            int rows_valid, int tid) {
  constexpr int kChunks = Tile::kD / 8;
  for (int idx = tid; idx < Tile::kBlockN * kChunks; idx += Tile::kThreads) {
    const int row = idx / kChunks, chunk = idx % kChunks;
    const bool valid = row < rows_valid;
    cuda::cp_async_16(smem + row * Tile::kVPitch + chunk * 8, valid ? gmem + row * stride + chunk * 8 : gmem, valid);
  }
}

// kRows rows of a 16-bit [rows, kD] operand (row stride `stride` elements, 16-byte aligned) into
// padded shared rows of Tile::kQkPitch bytes; rows past `rows_valid` are zero-filled.
template <class Tile, int kRows>
__device__ __forceinline__ void load_16bit_rows(std::uint8_t* smem, const typename Tile::T* gmem, std::int64_t stride,
                                                int rows_valid, int tid) {
  constexpr int kChunks = Tile::kD / 8;
  for (int idx = tid; idx < kRows * kChunks; idx += Tile::kThreads) {
    const int row = idx / kChunks, chunk = idx % kChunks;
    const bool valid = row < rows_valid;
    cuda::cp_async_16(smem + row * Tile::kQkPitch + chunk * 16, valid ? gmem + row * stride + chunk * 8 : gmem, valid);
  }
}

// The E4M3 V of one block: kD channel rows of kBlockN keys (the V pass's layout, [channel][key] in
// its order within 16-key groups, zeros past the sequence up to kv_padded).
template <class Tile>
__device__ __forceinline__ void load_v8_cols(std::uint8_t* smem, const std::uint8_t* gmem, std::int64_t kv_padded, int tid) {
  constexpr int kChunks = Tile::kBlockN / 16;
  for (int idx = tid; idx < Tile::kD * kChunks; idx += Tile::kThreads) {
    const int c = idx / kChunks, chunk = idx % kChunks;
    cuda::cp_async_16(smem + c * Tile::kV8Pitch + chunk * 16, gmem + c * kv_padded + chunk * 16, true);
  }
}

// grid (ceil(Sq / kBlockM), Hq, B), Tile::kThreads threads, Tile::kSmemBytes dynamic shared memory.
template <class Tile>
__global__ void __launch_bounds__(Tile::kThreads) sage_fwd_ampere_kernel(const SageParams p) {
  using T = typename Tile::T;
  using Mma = cuda::MmaOp<T>;
  constexpr int kD = Tile::kD, kBlockM = Tile::kBlockM, kBlockN = Tile::kBlockN;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  std::uint8_t* sQ = smem_raw;
  std::uint8_t* sK = sQ + Tile::kQBytes;
  std::uint8_t* sV8 = sK + Tile::kKStages * Tile::kKBytes;  // FP8 mode: E4M3 channel rows
  T* sV = reinterpret_cast<T*>(sV8);            // 16-bit mode: the caller's V rows

  const int m_block = gridDim.x - 1 - blockIdx.x;  // longest causal tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int hkv = h / (p.heads_q / p.heads_kv);
  const int m0 = m_block * kBlockM;
  const int n_end = p.causal ? min(p.seqlen_k, m0 + kBlockM) : p.seqlen_k;
  const int n_blocks = (n_end + kBlockN - 1) / kBlockN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  const std::int64_t bh = static_cast<std::int64_t>(b) * p.heads_q + h;
  const std::int64_t bhkv = static_cast<std::int64_t>(b) * p.heads_kv + hkv;
  const std::int8_t* q = p.q_int8 + (bh * p.seqlen_q + m0) * kD;
  const std::int8_t* k = p.k_int8 + bhkv * p.seqlen_k * kD;
  // kQk16: the caller's 16-bit Q rows of this tile and K rows of this head.
  const T* q16 = Tile::kQk16 ? static_cast<const T*>(p.q) + b * p.q_stride_b + m0 * p.q_stride_s + h * p.q_stride_h : nullptr;
  const T* k16 = Tile::kQk16 ? static_cast<const T*>(p.k) + b * p.k_stride_b + hkv * p.k_stride_h : nullptr;
  auto load_k = [&](std::uint8_t* dst, int block) {
    if constexpr (Tile::kQk16)
      load_16bit_rows<Tile, kBlockN>(dst, k16 + static_cast<std::int64_t>(block) * kBlockN * p.k_stride_s, p.k_stride_s,
                                     p.seqlen_k - block * kBlockN, tid);
    else
      load_int8_rows<Tile, kBlockN>(dst, k + static_cast<std::int64_t>(block) * kBlockN * kD, p.seqlen_k - block * kBlockN,
                                    tid);
  };
  const T* v = static_cast<const T*>(p.v) + b * p.v_stride_b + hkv * p.v_stride_h;
  const std::uint8_t* v8 = Tile::kFp8 ? p.v_e4m3 + bhkv * kD * p.kv_padded : nullptr;

  if constexpr (Tile::kQk16) load_16bit_rows<Tile, kBlockM>(sQ, q16, p.q_stride_s, p.seqlen_q - m0, tid);
  else load_int8_rows<Tile, kBlockM>(sQ, q, p.seqlen_q - m0, tid);
  if (n_blocks > 0) load_k(sK, 0);
  cuda::cp_async_commit();
  if (n_blocks > 0) {
    if constexpr (Tile::kFp8) load_v8_cols<Tile>(sV8, v8, p.kv_padded, tid);
    else load_v_rows<Tile>(sV, v, p.v_stride_s, p.seqlen_k, tid);
  }
  cuda::cp_async_commit();

  // The INT8 scales of this thread's two rows (0 past the sequence).
  float qs[2];
  const int row0 = m0 + warp * 16 + lane / 4;
#pragma unroll
  for (int r = 0; r < 2; ++r)
    qs[r] = !Tile::kQk16 && row0 + 8 * r < p.seqlen_q ? p.q_scale[bh * p.q_groups + row0 + 8 * r] : 0.f;
  const float* k_scale = Tile::kQk16 ? nullptr : p.k_scale + bhkv * p.k_groups;
  const std::uint8_t* mask = p.kv_mask != nullptr ? p.kv_mask + b * p.mask_stride_b : nullptr;

  float o[Tile::kDTiles][4];
#pragma unroll
  for (int d = 0; d < Tile::kDTiles; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const std::uint8_t* sQ_warp = sQ + (warp * 16 + lane % 16) * Tile::kQkPitch + (lane / 16) * 16;

  for (int n = 0; n < n_blocks; ++n) {
    const int stage = n & 1;
    const std::uint8_t* sKs = sK + (Tile::kKStages == 2 ? stage : 0) * Tile::kKBytes;
    const T* sVs = sV + stage * kBlockN * Tile::kVPitch;
    const std::uint8_t* sV8s = sV8 + stage * Tile::kVBytes;
    cuda::cp_async_wait<1>();  // K of block n (V's group may still be in flight)
    __syncthreads();
    if constexpr (Tile::kKStages == 2) {
      if (n + 1 < n_blocks) load_k(sK + (stage ^ 1) * Tile::kKBytes, n + 1);
      cuda::cp_async_commit();
    }

    // The products: INT32 sums of INT8 (ldmatrix gives each thread its four bytes of a 32-byte
    // step), or kQk16's fp32 sums of 16-bit values (two values of a 32-byte step).
    using Acc = std::conditional_t<Tile::kQk16, float, int>;
    Acc si[Tile::kNTiles][4];
#pragma unroll
    for (int j = 0; j < Tile::kNTiles; ++j) si[j][0] = si[j][1] = si[j][2] = si[j][3] = 0;
#pragma unroll
    for (int kk = 0; kk < Tile::kQkSteps; ++kk) {
      std::uint32_t a[4];
      cuda::ldmatrix_x4(a, sQ_warp + kk * 32);
#pragma unroll
      for (int j = 0; j < Tile::kNTiles; j += 2) {
        std::uint32_t bk[4];
        const int mat = lane / 8;
        cuda::ldmatrix_x4(bk, sKs + (j * 8 + (mat / 2) * 8 + lane % 8) * Tile::kQkPitch + kk * 32 + (mat % 2) * 16);
        if constexpr (Tile::kQk16) {
          Mma::run(si[j], a, bk[0], bk[1]);
          Mma::run(si[j + 1], a, bk[2], bk[3]);
        } else {
          mma_s8(si[j], a, bk[0], bk[1]);
          mma_s8(si[j + 1], a, bk[2], bk[3]);
        }
      }
    }
    if constexpr (Tile::kKStages == 1) {
      __syncthreads();  // every warp has read this block's K: the next one loads under the softmax and P V
      if (n + 1 < n_blocks) load_k(sK, n + 1);
      cuda::cp_async_commit();
    }

    // Scores: the INT32 sum times q_scale * k_scale (one K scale per kKGroup keys), exactly as the CPU.
    // kQk16: the fp32 sum times the softmax scale in log2 units.
    constexpr int kGroups = kBlockN / kKGroup, kGroupTiles = kKGroup / 8;
    float f[kGroups][2];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int kg = n * kGroups + g;
      const float ks = Tile::kQk16 ? 0.f : kg < p.k_groups ? k_scale[kg] : 0.f;  // a group past the keys has only masked keys
      f[g][0] = __fmul_rn(qs[0], ks);
      f[g][1] = __fmul_rn(qs[1], ks);
    }
    float s[Tile::kNTiles][4];
#pragma unroll
    for (int j = 0; j < Tile::kNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if constexpr (Tile::kQk16) s[j][e] = si[j][e] * p.scale_log2;
        else s[j][e] = __fmul_rn(__int2float_rn(si[j][e]), f[j / kGroupTiles][e / 2]);
      }
    const int n0 = n * kBlockN;
    if (mask != nullptr || n0 + kBlockN > p.seqlen_k || (p.causal && n0 + kBlockN - 1 > m0)) {
#pragma unroll
      for (int j = 0; j < Tile::kNTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = row0 + (e >= 2 ? 8 : 0), col = n0 + j * 8 + (lane % 4) * 2 + (e & 1);
          bool keep = col < p.seqlen_k && !(p.causal && col > row);
          if (keep && mask != nullptr) keep = mask[col * p.mask_stride_s] != 0;
          if (!keep) s[j][e] = -INFINITY;
        }
    }

    // The block's exact online softmax. 16-bit mode: l sums unrounded p, P is rounded to the input
    // dtype. FP8 mode: l is rescaled here and gains the sum of the E4M3 P from the product below.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
#pragma unroll
      for (int j = 0; j < Tile::kNTiles; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float use = mx == -INFINITY ? 0.f : mx;
      const float alpha = cuda::fast_exp2(m[r] - use);
      m[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < Tile::kNTiles; ++j) {
        s[j][2 * r] = cuda::fast_exp2(s[j][2 * r] - use);
        s[j][2 * r + 1] = cuda::fast_exp2(s[j][2 * r + 1] - use);
        if constexpr (!Tile::kFp8) sum += s[j][2 * r] + s[j][2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int d = 0; d < Tile::kDTiles; ++d) {
        o[d][2 * r] *= alpha;
        o[d][2 * r + 1] *= alpha;
      }
    }
    cuda::cp_async_wait<1>();  // V of block n
    __syncthreads();
    if (n + 1 < n_blocks) {
      if constexpr (Tile::kFp8)
        load_v8_cols<Tile>(sV8 + (stage ^ 1) * Tile::kVBytes, v8 + static_cast<std::int64_t>(n + 1) * kBlockN,
                           p.kv_padded, tid);
      else
        load_v_rows<Tile>(sV + (stage ^ 1) * kBlockN * Tile::kVPitch,
                          v + static_cast<std::int64_t>(n + 1) * kBlockN * p.v_stride_s, p.v_stride_s,
                          p.seqlen_k - (n + 1) * kBlockN, tid);
    }
    cuda::cp_async_commit();
    if constexpr (Tile::kFp8) {
      // P (times 448, E4M3) as the A operand of m16n8k32: register 0 holds row lane / 4's keys
      // 2t, 2t + 1 (score tile 4kk) and 8 + 2t, 9 + 2t (tile 4kk + 1), t = lane % 4, at positions
      // 4t .. 4t + 3; the V pass stores V's keys in that order (sage_quant_v_block), and ldmatrix
      // hands each thread the matching four positions of its channel.
      // Every step's P packed first, so the scores' registers are free for the block's accumulators.
      std::uint32_t a[Tile::kPvSteps][4];
#pragma unroll
      for (int kk = 0; kk < Tile::kPvSteps; ++kk) {
        const float (&s0)[4] = s[4 * kk], (&s1)[4] = s[4 * kk + 1], (&s2)[4] = s[4 * kk + 2], (&s3)[4] = s[4 * kk + 3];
        a[kk][0] = pack_e4m3x4(s0[0] * kE4m3Max, s0[1] * kE4m3Max, s1[0] * kE4m3Max, s1[1] * kE4m3Max);
        a[kk][1] = pack_e4m3x4(s0[2] * kE4m3Max, s0[3] * kE4m3Max, s1[2] * kE4m3Max, s1[3] * kE4m3Max);
        a[kk][2] = pack_e4m3x4(s2[0] * kE4m3Max, s2[1] * kE4m3Max, s3[0] * kE4m3Max, s3[1] * kE4m3Max);
        a[kk][3] = pack_e4m3x4(s2[2] * kE4m3Max, s2[3] * kE4m3Max, s3[2] * kE4m3Max, s3[3] * kE4m3Max);
      }
      float acc[Tile::kDTiles][4], acc_l[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int d = 0; d < Tile::kDTiles; ++d) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
      constexpr std::uint32_t kOnes = 0x38383838u;  // four E4M3 1.0
#pragma unroll
      for (int kk = 0; kk < Tile::kPvSteps; ++kk) {
        mma_e4m3(acc_l, a[kk], kOnes, kOnes);
#pragma unroll
        for (int d = 0; d < Tile::kDTiles; d += 2) {
          std::uint32_t bv[4];
          const int mat = lane / 8;
          cuda::ldmatrix_x4(bv, sV8s + ((d + mat / 2) * 8 + lane % 8) * Tile::kV8Pitch + kk * 32 + (mat % 2) * 16);
          mma_e4m3(acc[d], a[kk], bv[0], bv[1]);
          mma_e4m3(acc[d + 1], a[kk], bv[2], bv[3]);
        }
      }
#pragma unroll
      for (int d = 0; d < Tile::kDTiles; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[d][e] += acc[d][e];
      l[0] += acc_l[0];
      l[1] += acc_l[2];
    } else {
      std::uint32_t pf[Tile::kPvSteps][4];
#pragma unroll
      for (int kk = 0; kk < Tile::kPvSteps; ++kk) {
        pf[kk][0] = Mma::pack(s[2 * kk][0], s[2 * kk][1]);
        pf[kk][1] = Mma::pack(s[2 * kk][2], s[2 * kk][3]);
        pf[kk][2] = Mma::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pf[kk][3] = Mma::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      }
#pragma unroll
      for (int kk = 0; kk < Tile::kPvSteps; ++kk)
#pragma unroll
        for (int d = 0; d < Tile::kDTiles; d += 2) {
          std::uint32_t bv[4];
          const int mat = lane / 8;
          cuda::ldmatrix_x4_trans(bv, sVs + (kk * 16 + (mat % 2) * 8 + lane % 8) * Tile::kVPitch + (d + mat / 2) * 8);
          Mma::run(o[d], pf[kk], bv[0], bv[1]);
          Mma::run(o[d + 1], pf[kk], bv[2], bv[3]);
        }
    }
  }
  cuda::cp_async_wait<0>();

  // Normalise and store pairs; the LSE adds back what smoothing K took from the scores. FP8 mode: o
  // sums (448 p)(v / vs) and l sums 448 p, so each value is o vs / l and the LSE takes log2(448) off.
  T* out = static_cast<T*>(p.out);
  const float* vs = Tile::kFp8 ? p.v_scale + bhkv * kD + (lane % 4) * 2 : nullptr;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float total = l[r];
    if constexpr (!Tile::kFp8) {  // FP8: the product with ones gave every thread of the quad the whole sum
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
    }
    const int row = row0 + 8 * r;
    if (row >= p.seqlen_q) continue;
    const float inv = total > 0.f ? 1.f / total : 0.f;
    if (p.lse != nullptr && lane % 4 == 0)
      p.lse[b * p.lse_stride_b + h * p.lse_stride_h + row * p.lse_stride_s] =
          total > 0.f ? (m[r] + __log2f(total) - (Tile::kFp8 ? kLog2E4m3Max : 0.f) +
                         (Tile::kQk16 ? 0.f : p.q_shift[bh * p.seqlen_q + row])) *
                            0.69314718055994531f
                      : -INFINITY;
    T* dst = out + b * p.out_stride_b + static_cast<std::int64_t>(row) * p.out_stride_s + h * p.out_stride_h + (lane % 4) * 2;
#pragma unroll
    for (int d = 0; d < Tile::kDTiles; ++d) {
      float x0 = o[d][2 * r], x1 = o[d][2 * r + 1];
      if constexpr (Tile::kFp8) {
        x0 *= __ldg(vs + d * 8);
        x1 *= __ldg(vs + d * 8 + 1);
      }
      *reinterpret_cast<std::uint32_t*>(dst + d * 8) = Mma::pack(x0 * inv, x1 * inv);
    }
  }
}

// One launch of `Tile`'s kernel over p.num_m_blocks x Hq x B tiles.
template <class Tile>
Status launch_sage_ampere_tile(const SageParams& p, cudaStream_t stream) {
  static_assert(Tile::kBlockM == 64, "the host counts tiles of kSageAmpereTileRows (64) rows");
  auto kernel = sage_fwd_ampere_kernel<Tile>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes);
  if (e != cudaSuccess) return CudaError(std::string("SAGE_ATTN: cannot reserve shared memory: ") + cudaGetErrorString(e));
  const dim3 grid(static_cast<unsigned>(p.num_m_blocks), static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(p);
  e = cudaGetLastError();
  if (e != cudaSuccess) return CudaError(std::string("SAGE_ATTN: Ampere/Ada kernel launch failed: ") + cudaGetErrorString(e));
  return Status::Ok();
}

// The head-size and dtype ladder of one mode of the kernel; `who` names the kernel in the refusal.
template <bool kFp8, bool kQk16>
Status launch_sage_ampere_mode(const SageParams& p, cudaStream_t stream, const char* who) {
  if (p.head_size == 64)
    return p.bf16 ? launch_sage_ampere_tile<SageAmpereTile<64, __nv_bfloat16, kFp8, kQk16>>(p, stream)
                  : launch_sage_ampere_tile<SageAmpereTile<64, __half, kFp8, kQk16>>(p, stream);
  if (p.head_size == 128)
    return p.bf16 ? launch_sage_ampere_tile<SageAmpereTile<128, __nv_bfloat16, kFp8, kQk16>>(p, stream)
                  : launch_sage_ampere_tile<SageAmpereTile<128, __half, kFp8, kQk16>>(p, stream);
  return Unsupported(std::string(who) + " has head sizes 64 and 128, not " + std::to_string(p.head_size) +
                     "; select TORCH_SDPA for this layer");
}

}  // namespace diffattn::sage
