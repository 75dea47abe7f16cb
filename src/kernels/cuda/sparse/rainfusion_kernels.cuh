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

#include "kernels/cuda/dense/mma_utils.cuh"
#include "kernels/sparse/rainfusion_tile_map.h"

namespace diffattn::rainfusion {

inline constexpr int kTileTokens = static_cast<int>(kRainTileTokens);

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
inline constexpr int kSampleChunk = 32;  // sampled queries at a time: two 16-row MMA tiles
static_assert(kTileTokens == kWarps * 16, "each warp scores 16 keys of the tile");

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Reduces over the four lanes of a quad (lanes 4g .. 4g + 3), which hold one row of an MMA tile.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// For each sampled query s of head bh and video key tile j: the largest of its scores against the
// tile's valid keys, and the sum of their exponentials relative to it, at
// stats[(bh * samples + s) * video + j]. Grid: (video tiles, B x Hq). The scores are one small
// product on the tensor cores (mma.sync m16n8k16, fp32 accumulation): 32 sampled queries at a
// time against the tile's 128 keys, warp w taking keys 16w .. 16w + 15; the rows' maxima and sums
// are then reduced over the quads and the warps through shared memory.
template <typename T, int kDim>
__global__ void __launch_bounds__(kStatsThreads)
    sampled_tile_stats(const T* qp, const T* kp, const std::int32_t* sample_slots, int samples,
                       const std::int32_t* valid, std::int64_t count, int video, int heads_q, int heads_kv,
                       float scale, float2* stats) {
  // Rows of kDim + 8 elements: 16-byte aligned, and a quad's fragment reads from eight rows fall
  // on distinct banks.
  constexpr int kRow = kDim + 8, kVecs = kDim / 8;
  __shared__ alignas(16) T keys[kTileTokens][kRow];
  __shared__ alignas(16) T queries[kSampleChunk][kRow];
  __shared__ float part_max[kWarps][kSampleChunk], part_sum[kWarps][kSampleChunk];
  const int j = blockIdx.x, bh = blockIdx.y, b = bh / heads_q, h = bh % heads_q, hk = h / (heads_q / heads_kv);
  const int rows = valid[j], warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const std::int64_t padded = count * kTileTokens;
  const T* tile = kp + ((b * padded + static_cast<std::int64_t>(j) * kTileTokens) * heads_kv + hk) * kDim;
  for (int i = threadIdx.x; i < kTileTokens * kVecs; i += kStatsThreads) {  // padding rows are zero
    const int r = i / kVecs, v = i % kVecs;
    *reinterpret_cast<uint4*>(&keys[r][v * 8]) =
        *reinterpret_cast<const uint4*>(tile + static_cast<std::int64_t>(r) * heads_kv * kDim + v * 8);
  }
  const auto word = [](const T* at) { return *reinterpret_cast<const std::uint32_t*>(at); };
  for (int s0 = 0; s0 < samples; s0 += kSampleChunk) {
    const int n = min(kSampleChunk, samples - s0);
    __syncthreads();  // the keys are in, and the previous chunk's queries and partials are read
    for (int i = threadIdx.x; i < kSampleChunk * kVecs; i += kStatsThreads) {
      const int s = i / kVecs, v = i % kVecs;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (s < n)
        x = *reinterpret_cast<const uint4*>(qp + ((b * padded + sample_slots[s0 + s]) * heads_q + h) * kDim + v * 8);
      *reinterpret_cast<uint4*>(&queries[s][v * 8]) = x;
    }
    __syncthreads();
    float acc[2][2][4] = {};  // [query tile][key tile of 8][fragment]
#pragma unroll
    for (int k0 = 0; k0 < kDim; k0 += 16) {
      std::uint32_t a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const T* q = &queries[mt * 16 + g][k0 + 2 * c];
        a[mt][0] = word(q);
        a[mt][1] = word(q + 8 * kRow);
        a[mt][2] = word(q + 8);
        a[mt][3] = word(q + 8 * kRow + 8);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const T* k = &keys[warp * 16 + nt * 8 + g][k0 + 2 * c];
        const std::uint32_t b0 = word(k), b1 = word(k + 8);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) cuda::MmaOp<T>::run(acc[mt][nt], a[mt], b0, b1);
      }
    }
    // Fragment e of acc[mt][nt]: query row mt * 16 + g + 8 (e / 2), key warp * 16 + nt * 8 + 2c + e % 2.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float m = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = warp * 16 + nt * 8 + 2 * c + e;
            float& logit = acc[mt][nt][half * 2 + e];
            logit = key < rows ? logit * scale : -INFINITY;
            m = fmaxf(m, logit);
          }
        m = quad_max(m);
        if (c == 0) part_max[warp][mt * 16 + g + 8 * half] = m;
      }
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = mt * 16 + g + 8 * half;
        float m = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) m = fmaxf(m, part_max[w][row]);
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float logit = acc[mt][nt][half * 2 + e];
            sum += logit == -INFINITY ? 0.f : expf(logit - m);
          }
        sum = quad_sum(sum);
        if (c == 0) part_sum[warp][row] = sum;
      }
    __syncthreads();
    if (threadIdx.x < n) {
      const int row = threadIdx.x;
      float m = -INFINITY, sum = 0.f;
      for (int w = 0; w < kWarps; ++w) m = fmaxf(m, part_max[w][row]), sum += part_sum[w][row];
      stats[(static_cast<std::int64_t>(bh) * samples + s0 + row) * video + j] = make_float2(m, sum);
    }
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
