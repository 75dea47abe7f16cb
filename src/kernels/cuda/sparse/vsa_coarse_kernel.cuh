#pragma once
// FASTVIDEO_VSA's coarse branch on the GPU, over the heads of a pass (vsa_cuda_config.h bounds how
// many so that their scores stay within a fixed workspace):
// 1. coarse_gemm_kernel<true>: scores[z, i, j] = scale * q_mean(i) . k_mean(j) for every query and
//    key cube of the pass's head z, a float32 GEMM on the CUDA cores (128 x 128 tiles, 8 x 8 a
//    thread), each key mean read once per 128 query cubes;
// 2. coarse_top_k_kernel: a warp per query cube stages its row of scores in shared memory, writes
//    its top-k key cubes as an ascending list and, with a gate, turns the row into softmax weights
//    in place;
// 3. with a gate, coarse_gemm_kernel<false>: coarse_out = weights x value cube means.
// The sums run in float32 in a different order than the CPU's, so a list can differ from the CPU's
// where two scores are within rounding of each other.

#include <cmath>
#include <cstdint>

#include "kernels/cuda/sparse/vsa_cuda_config.h"
#include "kernels/cuda/sparse/warp_rank_cut.cuh"

namespace diffattn::vsa {

using sparse::order_key;

// The coarse branch's inputs and outputs over the whole call.
struct CoarseParams {
  const float* q_means = nullptr;  // [B, cubes, Hq, D]
  const float* k_means = nullptr;  // [B, cubes, Hkv, D]
  const float* v_means = nullptr;  // [B, cubes, Hkv, D]; read only with coarse_out
  float* coarse_out = nullptr;     // [B, cubes, Hq, D], or nullptr: no coarse output (no gate)
  std::int32_t* indices = nullptr;  // [B * Hq * cubes, topk]: row (b * Hq + h) * cubes + c
  int topk = 0;
  float scale = 0.f;
};

// One operand of the coarse GEMMs for the pass's head z (sequence b, query head h): rows of `ld`
// floats from data + b * per_batch + (h / group) * per_head + z * per_pass.
template <typename T>
struct CoarseMatrix {
  T* data = nullptr;
  std::int64_t ld = 0, per_batch = 0, per_head = 0, per_pass = 0;
  int group = 1;

  __device__ T* at(std::int64_t b, std::int64_t h, std::int64_t z) const {
    return data + b * per_batch + h / group * per_head + z * per_pass;
  }
};

// c = alpha * a x op(b) for each head of a pass: a is [m, k]; op(b) is b^T for b stored [n, k]
// (kBRowsAreColumns, the scores) or b stored [k, n] (the values); c is [m, n].
struct CoarseGemm {
  CoarseMatrix<const float> a, b;
  CoarseMatrix<float> c;
  int m = 0, n = 0, k = 0;
  float alpha = 1.f;
  std::int64_t first_head = 0;  // the pass's first (sequence, query head) pair, b * heads_q + h
  int heads_q = 0;
};

template <bool kBRowsAreColumns>
__global__ void __launch_bounds__(kCoarseGemmThreads) coarse_gemm_kernel(CoarseGemm g) {
  constexpr int kTile = kCoarseGemmTile, kDepth = kCoarseGemmDepth, kRow = kTile + 4;
  static_assert(kCoarseGemmThreads == 256 && kTile == 128, "16 x 16 threads, 8 x 8 outputs each");
  __shared__ __align__(16) float a_s[kDepth * kRow];  // [depth][rows of the tile]
  __shared__ __align__(16) float b_s[kDepth * kRow];  // [depth][columns of the tile]
  const std::int64_t z = blockIdx.z, pair = g.first_head + z, b = pair / g.heads_q, h = pair % g.heads_q;
  const float* a = g.a.at(b, h, z);
  const float* bm = g.b.at(b, h, z);
  float* c = g.c.at(b, h, z);
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[8][8] = {};
  for (int k0 = 0; k0 < g.k; k0 += kDepth) {
    // Consecutive threads read consecutive floats of a row (64-byte runs along the depth).
    for (int i = threadIdx.x; i < kTile * kDepth; i += kCoarseGemmThreads) {
      const int row = i / kDepth, kk = i % kDepth, m = m0 + row, k = k0 + kk;
      a_s[kk * kRow + row] = m < g.m && k < g.k ? a[m * g.a.ld + k] : 0.f;
    }
    if constexpr (kBRowsAreColumns) {
      for (int i = threadIdx.x; i < kTile * kDepth; i += kCoarseGemmThreads) {
        const int col = i / kDepth, kk = i % kDepth, n = n0 + col, k = k0 + kk;
        b_s[kk * kRow + col] = n < g.n && k < g.k ? bm[n * g.b.ld + k] : 0.f;
      }
    } else {
      for (int i = threadIdx.x; i < kTile * kDepth; i += kCoarseGemmThreads) {
        const int kk = i / kTile, col = i % kTile, n = n0 + col, k = k0 + kk;
        b_s[kk * kRow + col] = n < g.n && k < g.k ? bm[k * g.b.ld + n] : 0.f;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kDepth; ++kk) {
      // Rows 4 ty .. 4 ty + 3 and 64 + 4 ty .., columns 4 tx .. and 64 + 4 tx ..: 16-byte reads.
      const float4 a0 = *reinterpret_cast<const float4*>(a_s + kk * kRow + 4 * ty);
      const float4 a1 = *reinterpret_cast<const float4*>(a_s + kk * kRow + 64 + 4 * ty);
      const float4 b0 = *reinterpret_cast<const float4*>(b_s + kk * kRow + 4 * tx);
      const float4 b1 = *reinterpret_cast<const float4*>(b_s + kk * kRow + 64 + 4 * tx);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int m = m0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
    if (m >= g.m) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int n = n0 + (j < 4 ? 4 * tx + j : 64 + 4 * tx + j - 4);
      if (n < g.n) c[m * g.c.ld + n] = g.alpha * acc[i][j];
    }
  }
}

// One warp: the `topk` highest of `scores[0, cubes)`, ties to the lower index, written ascending.
// The cut is warp_rank_cut's radix select over the scores' order-preserving keys, in `hist` (the
// warp's 256 words of shared memory); then every key above it is taken with the lowest-index keys
// equal to it.
__device__ inline void warp_top_k(const float* scores, int cubes, int topk, std::int32_t* out,
                                  unsigned* hist) {
  const unsigned lane = threadIdx.x % 32, below = (1u << lane) - 1u;
  if (topk == cubes) {
    for (int j = lane; j < cubes; j += 32) out[j] = j;
    return;
  }
  const sparse::RankCut cut = sparse::warp_rank_cut(
      cubes, topk, [](int) { return true; }, [&](int j) { return order_key(scores[j]); }, hist);
  const unsigned threshold = cut.threshold;
  const int ties = cut.ties;
  int written = 0, tied = 0;
  for (int j0 = 0; j0 < cubes && written < topk; j0 += 32) {
    const int j = j0 + static_cast<int>(lane);
    const unsigned key = j < cubes ? order_key(scores[j]) : 0u;
    const unsigned gt = __ballot_sync(~0u, j < cubes && key > threshold);
    const unsigned eq = __ballot_sync(~0u, j < cubes && key == threshold);
    const bool take = ((gt >> lane) & 1u) || (((eq >> lane) & 1u) && tied + __popc(eq & below) < ties);
    const unsigned taken = __ballot_sync(~0u, take);
    if (take) out[written + __popc(taken & below)] = j;
    written += __popc(taken);
    tied += __popc(eq);
  }
}

__device__ inline float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(~0u, x, o));
  return x;
}

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(~0u, x, o);
  return x;
}

struct CoarseTopK {
  float* scores = nullptr;          // the pass's [heads, cubes, ld] scores; softmax weights after, with a gate
  std::int32_t* indices = nullptr;  // [B * Hq * cubes, topk]: row (b * Hq + h) * cubes + c
  std::int64_t first_head = 0, rows = 0;  // the pass's first (sequence, head) pair and its heads x cubes rows
  int cubes = 0, ld = 0, topk = 0;
  bool weights = false;  // write the softmax weights over the scores (the gated coarse output needs them)
};

// A warp per query cube of the pass; shared memory: each warp's row of `ld` scores, then each
// warp's 256-word histogram (coarse_top_k_smem_bytes).
__global__ void coarse_top_k_kernel(CoarseTopK p) {
  extern __shared__ float4 smem4[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * warps + warp;
  if (r >= p.rows) return;  // warp-level work only from here: no block barrier follows
  float* row = reinterpret_cast<float*>(smem4) + static_cast<std::int64_t>(warp) * p.ld;
  unsigned* hist = reinterpret_cast<unsigned*>(reinterpret_cast<float*>(smem4) + static_cast<std::int64_t>(warps) * p.ld) +
                   warp * 256;
  float* global_row = p.scores + r * p.ld;
  for (int j = 4 * lane; j < p.cubes; j += 128)
    *reinterpret_cast<float4*>(row + j) = *reinterpret_cast<const float4*>(global_row + j);
  __syncwarp();
  warp_top_k(row, p.cubes, p.topk, p.indices + (p.first_head * p.cubes + r) * p.topk, hist);
  if (!p.weights) return;
  __syncwarp();
  float m = -INFINITY;
  for (int j = lane; j < p.cubes; j += 32) m = fmaxf(m, row[j]);
  m = warp_max(m);
  float sum = 0.f;
  for (int j = lane; j < p.cubes; j += 32) sum += row[j] = expf(row[j] - m);
  const float inv = 1.f / warp_sum(sum);
  for (int j = lane; j < p.cubes; j += 32) global_row[j] = row[j] * inv;
}

}  // namespace diffattn::vsa
