#pragma once
// RAINFUSION_ATTN's GPU steps before and after its plan (kernels/cuda/sparse/rainfusion_cuda.cu runs
// them): the copies into and out of padded tile order, the video tiles' mean Q and K, their block
// scores, and each sampled query's attention mass per video key tile, all in float32. Padded
// buffers are [B, tiles * kTileTokens, H, D], contiguous, tile t's valid rows first and its
// padding rows zero (RainTiles::valid).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/sparse/rainfusion_tile_map.h"

namespace diffattn::rainfusion {

inline constexpr int kTileTokens = static_cast<int>(kRainTileTokens);
inline constexpr int kKeysPerLane = kTileTokens / 32;  // a warp scores a key tile, each lane every 32nd key
static_assert(kTileTokens % 32 == 0, "sampled_tile_stats spreads a key tile over a warp's lanes");

// Element strides of a [B, S, H, D] view.
struct Strides {
  std::int64_t b, s, h, e;
};

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

inline constexpr int kGatherThreads = 128;

// One tile of batch entry b into padded tile order (grid: (B x tiles, column blocks); each thread
// one run of kVec elements of the rows' H x D, down the tile's kTileTokens slots), zeros for padding
// slots; the 2-byte elements are copied as they are (kVec = 8: 16-byte accesses, where the source's
// rows allow them). With `means`, a video tile's mean over its valid rows is written too, [B, video
// tiles, H x D] in float32, summed row by row in slot order.
template <int kVec, typename T>
__global__ void __launch_bounds__(kGatherThreads)
    gather_tile(const std::uint16_t* src, Strides st, std::uint16_t* dst, RainTileMap map, int heads, int dim,
                float* means) {
  static_assert(sizeof(T) == sizeof(std::uint16_t), "16-bit inputs");
  __shared__ std::int64_t token_of_row[kTileTokens];
  const std::int64_t tiles = map.tiles(), b = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  for (int r = threadIdx.x; r < kTileTokens; r += blockDim.x) token_of_row[r] = map.token_at(tile * kTileTokens + r);
  __syncthreads();
  const int width = heads * dim, c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c * kVec >= width) return;
  const int e0 = c * kVec, h = e0 / dim, e = e0 % dim;
  const std::uint16_t* from = src + b * st.b + h * st.h + e * st.e;
  std::uint16_t* to = dst + (b * tiles + tile) * kTileTokens * width + e0;
  float sum[kVec] = {};
  for (int r = 0; r < kTileTokens; ++r) {
    const std::int64_t token = token_of_row[r];
    if constexpr (kVec == 8) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (token >= 0) v = *reinterpret_cast<const uint4*>(from + token * st.s);
      *reinterpret_cast<uint4*>(to + static_cast<std::int64_t>(r) * width) = v;
      if (means != nullptr && token >= 0) {
        const T* x = reinterpret_cast<const T*>(&v);
#pragma unroll
        for (int i = 0; i < 8; ++i) sum[i] += to_float(x[i]);
      }
    } else {
      const std::uint16_t v = token >= 0 ? from[token * st.s] : std::uint16_t{0};
      to[static_cast<std::int64_t>(r) * width] = v;
      if (means != nullptr && token >= 0) {
        T x;
        memcpy(&x, &v, sizeof v);
        sum[0] += to_float(x);
      }
    }
  }
  if (means == nullptr || tile >= map.video_tiles()) return;
  const float rows = static_cast<float>(map.valid(tile));
  float* out = means + (b * map.video_tiles() + tile) * width + e0;
#pragma unroll
  for (int i = 0; i < kVec; ++i) out[i] = sum[i] / rows;
}

// The reverse for the output: token `token` of batch entry b (one block each, b * tokens + token)
// from its slot's row of the padded result, into `dst` with its strides.
template <int kVec>
__global__ void scatter_from_tiles(const std::uint16_t* src, std::uint16_t* dst, Strides st, RainTileMap map,
                                   std::int64_t tokens, int heads, int dim) {
  const std::int64_t row = blockIdx.x, b = row / tokens, token = row % tokens;
  const std::uint16_t* in = src + (b * map.padded_length() + map.slot_of(token)) * heads * dim;
  const int chunks = heads * dim / kVec;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int e0 = c * kVec, h = e0 / dim, e = e0 % dim;
    if constexpr (kVec == 8) {
      *reinterpret_cast<uint4*>(dst + b * st.b + token * st.s + h * st.h + e) = reinterpret_cast<const uint4*>(in)[c];
    } else {
      dst[b * st.b + token * st.s + h * st.h + e * st.e] = in[e0];
    }
  }
}

inline constexpr int kScoreTile = 64;  // block scores per block: 64 x 64, 4 x 4 per thread
inline constexpr int kScoreStep = 16;  // channels per shared-memory stage

// scores[bh][i][j] = scale * mean_q[b, i, h] . mean_k[b, j, h's kv head] for every pair of video
// tiles. Grid: (j tiles of 64, i tiles of 64, B x Hq); 16 x 16 threads.
__global__ void __launch_bounds__(256) block_scores(const float* mean_q, const float* mean_k, float* scores, int video,
                                                    int heads_q, int heads_kv, int dim, float scale) {
  __shared__ float qs[kScoreStep][kScoreTile + 1];
  __shared__ float ks[kScoreStep][kScoreTile + 1];
  const int bh = blockIdx.z, b = bh / heads_q, h = bh % heads_q, hk = h / (heads_q / heads_kv);
  const int i0 = blockIdx.y * kScoreTile, j0 = blockIdx.x * kScoreTile;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  // Tile i's mean at + i * heads * dim.
  const float* q = mean_q + (static_cast<std::int64_t>(b) * video * heads_q + h) * dim;
  const float* k = mean_k + (static_cast<std::int64_t>(b) * video * heads_kv + hk) * dim;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < dim; k0 += kScoreStep) {
    for (int l = tid; l < kScoreTile * kScoreStep; l += 256) {
      const int r = l / kScoreStep, c = l % kScoreStep;
      qs[c][r] = i0 + r < video ? q[static_cast<std::int64_t>(i0 + r) * heads_q * dim + k0 + c] : 0.f;
      ks[c][r] = j0 + r < video ? k[static_cast<std::int64_t>(j0 + r) * heads_kv * dim + k0 + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kScoreStep; ++c) {
      float a[4], w[4];
#pragma unroll
      for (int n = 0; n < 4; ++n) a[n] = qs[c][ty + 16 * n], w[n] = ks[c][tx + 16 * n];
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int n = 0; n < 4; ++n) acc[m][n] = fmaf(a[m], w[n], acc[m][n]);
    }
    __syncthreads();
  }
  float* out = scores + static_cast<std::int64_t>(bh) * video * video;
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const int i = i0 + ty + 16 * m, j = j0 + tx + 16 * n;
      if (i < video && j < video) out[static_cast<std::int64_t>(i) * video + j] = acc[m][n] * scale;
    }
}

inline constexpr int kStatsThreads = 256;
inline constexpr int kWarps = kStatsThreads / 32;
inline constexpr int kQueriesPerWarp = 4;
inline constexpr int kSampleChunk = kQueriesPerWarp * kWarps;  // sampled queries in shared memory at a time

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One query's stats over a key tile whose lanes hold the dot products of keys lane + 32 i.
__device__ __forceinline__ void write_tile_stats(const float (&dots)[kKeysPerLane], int rows, float scale,
                                                 float2* out) {
  const int lane = threadIdx.x % 32;
  float logits[kKeysPerLane];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kKeysPerLane; ++i) {
    logits[i] = lane + 32 * i < rows ? dots[i] * scale : -INFINITY;
    m = fmaxf(m, logits[i]);
  }
  m = warp_max(m);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kKeysPerLane; ++i) sum += lane + 32 * i < rows ? expf(logits[i] - m) : 0.f;
  sum = warp_sum(sum);
  if (lane == 0) *out = make_float2(m, sum);
}

// For each sampled query s of head bh and video key tile j: the largest of its scores against the
// tile's valid keys, and the sum of their exponentials relative to it, at
// stats[(bh * samples + s) * video + j]. Grid: (video tiles, B x Hq); each lane scores keys
// lane + 32 i.
template <typename T, int kDim>
__global__ void __launch_bounds__(kStatsThreads)
    sampled_tile_stats(const T* qp, const T* kp, const std::int32_t* sample_slots, int samples,
                       const std::int32_t* valid, std::int64_t count, int video, int heads_q, int heads_kv,
                       float scale, float2* stats) {
  // Keys and queries stay in the inputs' precision (exact: they are the inputs' values), so that a
  // key tile and a chunk of queries fit in static shared memory; key rows of kDim + 2 elements (an
  // odd number of words) keep the lanes' reads on distinct banks.
  __shared__ T keys[kTileTokens][kDim + 2];
  __shared__ T queries[kSampleChunk][kDim];
  const int j = blockIdx.x, bh = blockIdx.y, b = bh / heads_q, h = bh % heads_q, hk = h / (heads_q / heads_kv);
  const int rows = valid[j], warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t padded = count * kTileTokens;
  const T* tile = kp + ((b * padded + static_cast<std::int64_t>(j) * kTileTokens) * heads_kv + hk) * kDim;
  for (int i = threadIdx.x; i < kTileTokens * kDim; i += kStatsThreads) {  // padding rows are zero
    const int r = i / kDim, e = i % kDim;
    keys[r][e] = tile[static_cast<std::int64_t>(r) * heads_kv * kDim + e];
  }
  for (int s0 = 0; s0 < samples; s0 += kSampleChunk) {
    const int n = min(kSampleChunk, samples - s0);
    __syncthreads();  // the keys are in, and the previous chunk's queries are read
    for (int i = threadIdx.x; i < n * kDim; i += kStatsThreads) {
      const int s = i / kDim, e = i % kDim;
      queries[s][e] = qp[((b * padded + sample_slots[s0 + s]) * heads_q + h) * kDim + e];
    }
    __syncthreads();
    // Warp w scores queries w, w + 8, w + 16 and w + 24 of the chunk together: each key read
    // serves all four (a query past the chunk repeats its last one, unwritten).
    if (warp >= n) continue;
    int query[kQueriesPerWarp];
#pragma unroll
    for (int q = 0; q < kQueriesPerWarp; ++q) query[q] = min(warp + q * kWarps, n - 1);
    float dots[kQueriesPerWarp][kKeysPerLane] = {};
#pragma unroll 4
    for (int e = 0; e < kDim; ++e) {
      float k[kKeysPerLane];
#pragma unroll
      for (int i = 0; i < kKeysPerLane; ++i) k[i] = to_float(keys[lane + 32 * i][e]);
#pragma unroll
      for (int q = 0; q < kQueriesPerWarp; ++q) {
        const float x = to_float(queries[query[q]][e]);
#pragma unroll
        for (int i = 0; i < kKeysPerLane; ++i) dots[q][i] = fmaf(x, k[i], dots[q][i]);
      }
    }
    float2* out = stats + (static_cast<std::int64_t>(bh) * samples + s0 + warp) * video + j;
#pragma unroll
    for (int q = 0; q < kQueriesPerWarp; ++q)
      if (warp + q * kWarps < n)
        write_tile_stats(dots[q], rows, scale, out + static_cast<std::int64_t>(q) * kWarps * video);
  }
}

inline constexpr int kMassThreads = 256;

__device__ __forceinline__ float block_reduce(float v, bool take_max, float* shared) {
  v = take_max ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // `shared` is free from an earlier reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < kMassThreads / 32 ? shared[lane] : (take_max ? -INFINITY : 0.f);
  return take_max ? warp_max(v) : warp_sum(v);
}

// One sampled query's attention mass per video key tile from its tiles' stats: one block per
// (bh, sample) row, mass[row * video + j], summing to 1 over j.
__global__ void __launch_bounds__(kMassThreads) sampled_mass(const float2* stats, int video, float* mass) {
  __shared__ float shared[kMassThreads / 32];
  const std::int64_t row = blockIdx.x;
  const float2* st = stats + row * video;
  float most = -INFINITY;
  for (int j = threadIdx.x; j < video; j += kMassThreads) most = fmaxf(most, st[j].x);
  most = block_reduce(most, true, shared);
  float total = 0.f;
  for (int j = threadIdx.x; j < video; j += kMassThreads) total += st[j].y * expf(st[j].x - most);
  total = block_reduce(total, false, shared);
  for (int j = threadIdx.x; j < video; j += kMassThreads)
    mass[row * video + j] = st[j].y * expf(st[j].x - most) / total;
}

}  // namespace diffattn::rainfusion
