#pragma once
// FASTVIDEO_VSA's coarse branch on the GPU, one block per (query cubes, query head, batch): scores
// of each query cube's mean against every key cube's mean (float32), each query cube's top-k key
// cubes as an ascending list, and, with a gate, the softmax-weighted sum of the value cube means.
// Warps own whole query cubes; key and value cube means are staged through shared memory a tile
// at a time for all of them (vsa_cuda_config.h sizes the block).

#include <cmath>
#include <cstdint>

#include "kernels/cuda/sparse/vsa_cuda_config.h"
#include "kernels/cuda/sparse/warp_rank_cut.cuh"

namespace diffattn::vsa {

using sparse::order_key;

struct CoarseParams {
  const float* q_means = nullptr;  // [B, cubes, Hq, D]
  const float* k_means = nullptr;  // [B, cubes, Hkv, D]
  const float* v_means = nullptr;  // [B, cubes, Hkv, D]; read only with coarse_out
  float* coarse_out = nullptr;     // [B, cubes, Hq, D], or nullptr: no coarse output (no gate)
  std::int32_t* indices = nullptr;  // [B * Hq * cubes, topk]: row (b * Hq + h) * cubes + c
  int cubes = 0, heads_q = 0, heads_kv = 0, topk = 0;
  float scale = 0.f;
};

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

// Stages means[b, j0 .. j0 + kCoarseKeyTile, head, :] into `tile` (rows of kDim + 4 floats, zero
// past the last cube), after every warp is done with the previous tile.
template <int kDim>
__device__ void stage_cube_tile(const float* means, std::int64_t b, int j0, int head, int heads, int cubes,
                                float* tile) {
  constexpr int kQuads = kDim / 4;
  __syncthreads();
  for (int i = threadIdx.x; i < kCoarseKeyTile * kQuads; i += blockDim.x) {
    const int jj = i / kQuads, e = i % kQuads * 4, j = j0 + jj;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (j < cubes) x = *reinterpret_cast<const float4*>(means + ((b * cubes + j) * heads + head) * kDim + e);
    *reinterpret_cast<float4*>(tile + jj * (kDim + 4) + e) = x;
  }
  __syncthreads();
}

template <int kDim, int kPerWarp>
__global__ void coarse_top_k_kernel(CoarseParams p) {
  constexpr int kQueries = kCoarseWarps * kPerWarp;
  constexpr int kQRow = kDim + 4;  // padded: the 8 query rows a warp reads at once lie in distinct banks
  extern __shared__ float4 smem4[];
  float* q_s = reinterpret_cast<float*>(smem4);       // [kQueries][kDim + 4]
  float* tile = q_s + kQueries * kQRow;               // [kCoarseKeyTile][kDim + 4]
  float* scores = tile + kCoarseKeyTile * (kDim + 4);  // [kQueries][cubes]
  float* inv_sums = scores + static_cast<std::int64_t>(kQueries) * p.cubes;  // [kQueries]

  const int c0 = blockIdx.x * kQueries, h = blockIdx.y, hk = h / (p.heads_q / p.heads_kv);
  const std::int64_t b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kQueries * kDim; i += blockDim.x) {
    const int c = c0 + i / kDim;
    q_s[i / kDim * kQRow + i % kDim] = c < p.cubes ? p.q_means[((b * p.cubes + c) * p.heads_q + h) * kDim + i % kDim] : 0.f;
  }

  // Scores: warp w takes the tile's key cubes 4w .. 4w + 3 against all the block's query cubes,
  // lane l key 4w + l % 4 against query cubes l / 4 + 8 i. Each 16-byte read of a warp then touches
  // 8 query rows and 4 key rows, where one key row per lane against one query took 2.5 times the
  // shared-memory wavefronts (the coarse kernel was bound by them).
  static_assert(kCoarseKeyTile == 4 * kCoarseWarps, "each warp scores four key cubes of a tile");
  const int kk = warp * 4 + lane % 4, qq = lane / 4;
  for (int j0 = 0; j0 < p.cubes; j0 += kCoarseKeyTile) {
    stage_cube_tile<kDim>(p.k_means, b, j0, hk, p.heads_kv, p.cubes, tile);
    float acc[kPerWarp] = {};
    const float4* k_row = reinterpret_cast<const float4*>(tile + kk * (kDim + 4));
#pragma unroll 4
    for (int e4 = 0; e4 < kDim / 4; ++e4) {
      const float4 k = k_row[e4];
#pragma unroll
      for (int i = 0; i < kPerWarp; ++i) {
        const float4 q = reinterpret_cast<const float4*>(q_s + (qq + 8 * i) * kQRow)[e4];
        acc[i] += q.x * k.x + q.y * k.y + q.z * k.z + q.w * k.w;
      }
    }
    if (j0 + kk < p.cubes)
#pragma unroll
      for (int i = 0; i < kPerWarp; ++i)
        scores[static_cast<std::int64_t>(qq + 8 * i) * p.cubes + j0 + kk] = acc[i] * p.scale;
  }
  __syncthreads();

  // Each warp's query cubes: top-k from the scores, then the scores become softmax numerators.
  // The key tile is free until the value tiles are staged: it holds the warps' histograms.
  static_assert(kCoarseKeyTile * (kDim + 4) >= kCoarseWarps * 256, "the key tile holds every warp's histogram");
  unsigned* hist = reinterpret_cast<unsigned*>(tile) + warp * 256;
  for (int qi = 0; qi < kPerWarp; ++qi) {
    const int q = warp * kPerWarp + qi, c = c0 + q;
    if (c >= p.cubes) break;
    float* row = scores + static_cast<std::int64_t>(q) * p.cubes;
    const std::int64_t r = (b * p.heads_q + h) * p.cubes + c;
    warp_top_k(row, p.cubes, p.topk, p.indices + r * p.topk, hist);
    if (p.coarse_out == nullptr) continue;
    __syncwarp();
    float m = -INFINITY;
    for (int j = lane; j < p.cubes; j += 32) m = fmaxf(m, row[j]);
    m = warp_max(m);
    float sum = 0.f;
    for (int j = lane; j < p.cubes; j += 32) {
      row[j] = expf(row[j] - m);
      sum += row[j];
    }
    sum = warp_sum(sum);
    if (lane == 0) inv_sums[q] = 1.f / sum;
  }
  if (p.coarse_out == nullptr) return;

  // coarse_out = softmax-weighted value cube means: lanes over the head dimension.
  constexpr int kPerLane = kDim / 32;
  float acc[kPerWarp][kPerLane] = {};
  for (int j0 = 0; j0 < p.cubes; j0 += kCoarseKeyTile) {
    stage_cube_tile<kDim>(p.v_means, b, j0, hk, p.heads_kv, p.cubes, tile);
    const int tile_cubes = min(kCoarseKeyTile, p.cubes - j0);
    for (int jj = 0; jj < tile_cubes; ++jj)
#pragma unroll
      for (int qi = 0; qi < kPerWarp; ++qi) {
        const float w = scores[static_cast<std::int64_t>(warp * kPerWarp + qi) * p.cubes + j0 + jj];
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) acc[qi][t] += w * tile[jj * (kDim + 4) + lane + 32 * t];
      }
  }
#pragma unroll
  for (int qi = 0; qi < kPerWarp; ++qi) {
    const int q = warp * kPerWarp + qi, c = c0 + q;
    if (c >= p.cubes) continue;
    float* o = p.coarse_out + ((b * p.cubes + c) * p.heads_q + h) * kDim;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) o[lane + 32 * t] = acc[qi][t] * inv_sums[q];
  }
}

}  // namespace diffattn::vsa
