#pragma once
// SAGE_ATTN's attention kernel for Ampere and Ada (built as compute_80 PTX, so newer GPUs run it
// too), after the quantization kernels have written INT8 Q and smoothed INT8 K. The accurate P*V
// mode's arithmetic (kernels/sage/sage_quant.h): S = Q K^T with mma.sync m16n8k32 s8*s8 -> s32,
// each score the INT32 sum times its row's and its key group's INT8 scales, the exact online
// softmax in blocks of kKGroup keys (one K scale per block), P rounded to the input dtype and
// multiplied by the caller's V with mma.sync m16n8k16 and fp32 accumulation. FlashAttention-2
// tiling: four warps of 16 query rows, K and V double-buffered with cp.async in padded rows.

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/dense/mma_utils.cuh"
#include "kernels/cuda/sage/sage_params.h"
#include "kernels/sage/sage_quant.h"

namespace diffattn::sage {

template <int kD_, typename T_>
struct SageAmpereTile {
  using T = T_;
  static constexpr int kD = kD_;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kBlockN = kKGroup;  // one K scale per key block
  static constexpr int kQkPitch = kD + 16;  // bytes per INT8 row: 16 bytes of padding keep ldmatrix free of bank conflicts
  static constexpr int kVPitch = kD + 8;    // elements per V row, likewise
  static constexpr int kNTiles = kBlockN / 8;  // n8 tiles of the score block
  static constexpr int kDTiles = kD / 8;       // n8 tiles of the output
  static constexpr int kQkSteps = kD / 32;     // k32 steps of Q K^T
  static constexpr int kPvSteps = kBlockN / 16;  // k16 steps of P V
  static constexpr int kQBytes = kBlockM * kQkPitch;
  static constexpr int kKBytes = kBlockN * kQkPitch;
  static constexpr int kVBytes = kBlockN * kVPitch * 2;
  static constexpr int kSmemBytes = kQBytes + 2 * kKBytes + 2 * kVBytes;
  static_assert(kD == 64 || kD == 128, "SAGE_ATTN's Ampere kernel has hd64 and hd128");
  static_assert(kBlockN % 16 == 0, "P V steps of 16 keys");
};

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

// grid (ceil(Sq / kBlockM), Hq, B), Tile::kThreads threads, Tile::kSmemBytes dynamic shared memory.
template <class Tile>
__global__ void __launch_bounds__(Tile::kThreads) sage_fwd_ampere_kernel(const SageParams p) {
  using T = typename Tile::T;
  using Mma = cuda::MmaOp<T>;
  constexpr int kD = Tile::kD, kBlockM = Tile::kBlockM, kBlockN = Tile::kBlockN;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  std::uint8_t* sQ = smem_raw;
  std::uint8_t* sK = sQ + Tile::kQBytes;
  T* sV = reinterpret_cast<T*>(sK + 2 * Tile::kKBytes);

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
  const T* v = static_cast<const T*>(p.v) + b * p.v_stride_b + hkv * p.v_stride_h;

  load_int8_rows<Tile, kBlockM>(sQ, q, p.seqlen_q - m0, tid);
  if (n_blocks > 0) load_int8_rows<Tile, kBlockN>(sK, k, p.seqlen_k, tid);
  cuda::cp_async_commit();
  if (n_blocks > 0) load_v_rows<Tile>(sV, v, p.v_stride_s, p.seqlen_k, tid);
  cuda::cp_async_commit();

  // The INT8 scales of this thread's two rows (0 past the sequence).
  float qs[2];
  const int row0 = m0 + warp * 16 + lane / 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) qs[r] = row0 + 8 * r < p.seqlen_q ? p.q_scale[bh * p.q_groups + row0 + 8 * r] : 0.f;
  const float* k_scale = p.k_scale + bhkv * p.k_groups;
  const std::uint8_t* mask = p.kv_mask != nullptr ? p.kv_mask + b * p.mask_stride_b : nullptr;

  float o[Tile::kDTiles][4];
#pragma unroll
  for (int d = 0; d < Tile::kDTiles; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const std::uint8_t* sQ_warp = sQ + (warp * 16 + lane % 16) * Tile::kQkPitch + (lane / 16) * 16;

  for (int n = 0; n < n_blocks; ++n) {
    const int stage = n & 1;
    const std::uint8_t* sKs = sK + stage * Tile::kKBytes;
    const T* sVs = sV + stage * kBlockN * Tile::kVPitch;
    cuda::cp_async_wait<1>();  // K of block n (V's group may still be in flight)
    __syncthreads();
    if (n + 1 < n_blocks)
      load_int8_rows<Tile, kBlockN>(sK + (stage ^ 1) * Tile::kKBytes, k + static_cast<std::int64_t>(n + 1) * kBlockN * kD,
                                    p.seqlen_k - (n + 1) * kBlockN, tid);
    cuda::cp_async_commit();

    int si[Tile::kNTiles][4];
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
        mma_s8(si[j], a, bk[0], bk[1]);
        mma_s8(si[j + 1], a, bk[2], bk[3]);
      }
    }

    // Scores: the INT32 sum times q_scale * k_scale (one K scale per block), exactly as the CPU.
    const float ks = k_scale[n];
    float s[Tile::kNTiles][4];
    const float f[2] = {__fmul_rn(qs[0], ks), __fmul_rn(qs[1], ks)};
#pragma unroll
    for (int j = 0; j < Tile::kNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = __fmul_rn(__int2float_rn(si[j][e]), f[e / 2]);
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

    // The block's exact online softmax; l sums unrounded p, P is rounded to the input dtype.
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
        sum += s[j][2 * r] + s[j][2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int d = 0; d < Tile::kDTiles; ++d) {
        o[d][2 * r] *= alpha;
        o[d][2 * r + 1] *= alpha;
      }
    }
    std::uint32_t pf[Tile::kPvSteps][4];
#pragma unroll
    for (int kk = 0; kk < Tile::kPvSteps; ++kk) {
      pf[kk][0] = Mma::pack(s[2 * kk][0], s[2 * kk][1]);
      pf[kk][1] = Mma::pack(s[2 * kk][2], s[2 * kk][3]);
      pf[kk][2] = Mma::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pf[kk][3] = Mma::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }

    cuda::cp_async_wait<1>();  // V of block n
    __syncthreads();
    if (n + 1 < n_blocks)
      load_v_rows<Tile>(sV + (stage ^ 1) * kBlockN * Tile::kVPitch, v + static_cast<std::int64_t>(n + 1) * kBlockN * p.v_stride_s,
                        p.v_stride_s, p.seqlen_k - (n + 1) * kBlockN, tid);
    cuda::cp_async_commit();
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
  cuda::cp_async_wait<0>();

  // Normalise and store pairs; the LSE adds back what smoothing K took from the scores.
  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float total = l[r];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    const int row = row0 + 8 * r;
    if (row >= p.seqlen_q) continue;
    const float inv = total > 0.f ? 1.f / total : 0.f;
    if (p.lse != nullptr && lane % 4 == 0)
      p.lse[b * p.lse_stride_b + h * p.lse_stride_h + row * p.lse_stride_s] =
          total > 0.f ? (m[r] + __log2f(total) + p.q_shift[bh * p.seqlen_q + row]) * 0.69314718055994531f : -INFINITY;
    T* dst = out + b * p.out_stride_b + static_cast<std::int64_t>(row) * p.out_stride_s + h * p.out_stride_h + (lane % 4) * 2;
#pragma unroll
    for (int d = 0; d < Tile::kDTiles; ++d)
      *reinterpret_cast<std::uint32_t*>(dst + d * 8) = Mma::pack(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
  }
}

}  // namespace diffattn::sage
