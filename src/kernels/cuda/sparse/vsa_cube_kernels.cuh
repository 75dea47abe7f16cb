#pragma once
// FASTVIDEO_VSA's data movement on the GPU: strided [B, S, H, D] views gathered into padded cube
// order (with each cube's means over its valid tokens), the block-sparse lists' fixed parts, and
// the result scattered back into out's token order with the gated coarse branch. One block per
// (cube, batch); the cube's token of each slot is evaluated once per block (vsa_cube_map.h).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/sparse/vsa_cube_map.h"

namespace diffattn::vsa {

inline constexpr int kCubeThreads = 256;

// A strided [B, S, H, D] view as kernel arguments; strides in elements.
struct StridedView {
  void* data = nullptr;
  std::int64_t stride_b = 0, stride_s = 0, stride_h = 0, stride_e = 0;

  __device__ std::int64_t offset(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t e) const {
    return b * stride_b + s * stride_s + h * stride_h + e * stride_e;
  }
};

template <typename T>
__device__ float to_float(T v);
template <>
__device__ inline float to_float<__half>(__half v) { return __half2float(v); }
template <>
__device__ inline float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ T from_float(float v);
template <>
__device__ inline __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// kVec consecutive head-dimension elements: one 16-byte access for 8 (the caller checked that the
// view's head dimension is contiguous and its rows 16-byte aligned), else single elements.
template <typename T, int kVec>
struct alignas(kVec == 8 ? 16 : alignof(T)) Pack {
  T v[kVec];
};

template <typename T, int kVec>
__device__ Pack<T, kVec> load_pack(const T* p) {
  if constexpr (kVec == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    return *reinterpret_cast<const Pack<T, kVec>*>(&raw);
  } else {
    Pack<T, kVec> x;
    for (int k = 0; k < kVec; ++k) x.v[k] = p[k];
    return x;
  }
}

template <typename T, int kVec>
__device__ void store_pack(T* p, const Pack<T, kVec>& x) {
  if constexpr (kVec == 8) {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&x);
  } else {
    for (int k = 0; k < kVec; ++k) p[k] = x.v[k];
  }
}

// The token of each of cube `cube`'s 64 slots (-1: padding), for the block's threads.
__device__ inline void load_cube_tokens(const VsaCubeMap& map, std::int64_t cube, std::int64_t* tokens) {
  if (threadIdx.x < kVsaCubeTokens) tokens[threadIdx.x] = map.token_at(cube * kVsaCubeTokens + threadIdx.x);
  __syncthreads();
}

// src [B, tokens, H, D] (strided) into padded [B, cubes * 64, H, D] (contiguous, padding slots
// zero) and, when `means` is given, each cube's mean over its valid tokens: [B, cubes, H, D] float32.
// kVec elements per access: 8 needs src's head dimension contiguous and its rows 16-byte aligned.
template <typename T, int kVec>
__global__ void __launch_bounds__(kCubeThreads)
    gather_cubes_kernel(StridedView src, T* padded, float* means, VsaCubeMap map, int heads, int dim) {
  __shared__ std::int64_t tokens[kVsaCubeTokens];
  const std::int64_t cube = blockIdx.x, b = blockIdx.y, cubes = gridDim.x;
  load_cube_tokens(map, cube, tokens);
  const int valid = map.valid(cube);
  const T* in = static_cast<const T*>(src.data);
  for (int v = threadIdx.x; v < heads * dim / kVec; v += blockDim.x) {
    const int h = v * kVec / dim, e = v * kVec % dim;
    float sum[kVec] = {};
    for (int r = 0; r < kVsaCubeTokens; ++r) {
      T* dst = padded + ((b * cubes * kVsaCubeTokens + cube * kVsaCubeTokens + r) * heads + h) * dim + e;
      Pack<T, kVec> x;
      if (tokens[r] < 0) {
        for (int k = 0; k < kVec; ++k) x.v[k] = from_float<T>(0.f);
      } else if constexpr (kVec == 8) {
        x = load_pack<T, kVec>(in + src.offset(b, tokens[r], h, e));
      } else {
        x.v[0] = in[src.offset(b, tokens[r], h, e)];
      }
      store_pack<T, kVec>(dst, x);
      if (means != nullptr && r < valid)
        for (int k = 0; k < kVec; ++k) sum[k] += to_float(x.v[k]);
    }
    if (means != nullptr)
      for (int k = 0; k < kVec; ++k) means[((b * cubes + cube) * heads + h) * dim + e + k] = sum[k] / valid;
  }
}

// The fixed parts of the block-sparse lists: offsets[r] = r * topk for rows 0..rows (every query
// cube keeps topk key cubes) and each cube's valid tokens as its tile rows.
__global__ void fill_lists_kernel(std::int32_t* offsets, std::int64_t rows, std::int32_t topk,
                                  std::int32_t* tile_rows, VsaCubeMap map) {
  const std::int64_t cubes = map.cubes();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i <= rows || i < cubes;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (i <= rows) offsets[i] = static_cast<std::int32_t>(i * topk);
    if (i < cubes) tile_rows[i] = map.valid(i);
  }
}

// out[b, token, h, :] = fine[b, slot, h, :] + coarse[b, cube, h, :] * gate[b, token, h, :] (the
// second term only with a gate), for the valid slots of each cube. fine is padded
// [B, cubes * 64, H, D], coarse [B, cubes, H, D] float32; out and gate are strided, and kVec = 8
// needs both with a contiguous head dimension and 16-byte aligned rows.
template <typename T, int kVec>
__global__ void __launch_bounds__(kCubeThreads)
    scatter_cubes_kernel(const T* fine, const float* coarse, StridedView gate, StridedView out, VsaCubeMap map,
                         int heads, int dim) {
  __shared__ std::int64_t tokens[kVsaCubeTokens];
  const std::int64_t cube = blockIdx.x, b = blockIdx.y, cubes = gridDim.x;
  load_cube_tokens(map, cube, tokens);
  const int valid = map.valid(cube);
  const T* g = static_cast<const T*>(gate.data);
  T* o = static_cast<T*>(out.data);
  for (int v = threadIdx.x; v < heads * dim / kVec; v += blockDim.x) {
    const int h = v * kVec / dim, e = v * kVec % dim;
    float c[kVec] = {};
    if (g != nullptr)
      for (int k = 0; k < kVec; ++k) c[k] = coarse[((b * cubes + cube) * heads + h) * dim + e + k];
    for (int r = 0; r < valid; ++r) {
      const std::int64_t token = tokens[r];
      const Pack<T, kVec> f =
          load_pack<T, kVec>(fine + ((b * cubes * kVsaCubeTokens + cube * kVsaCubeTokens + r) * heads + h) * dim + e);
      Pack<T, kVec> gv;
      if (g != nullptr) {
        if constexpr (kVec == 8) {
          gv = load_pack<T, kVec>(g + gate.offset(b, token, h, e));
        } else {
          gv.v[0] = g[gate.offset(b, token, h, e)];
        }
      }
      Pack<T, kVec> y;
      for (int k = 0; k < kVec; ++k)
        y.v[k] = from_float<T>(to_float(f.v[k]) + (g != nullptr ? c[k] * to_float(gv.v[k]) : 0.f));
      if constexpr (kVec == 8) {
        store_pack<T, kVec>(o + out.offset(b, token, h, e), y);
      } else {
        o[out.offset(b, token, h, e)] = y.v[0];
      }
    }
  }
}

}  // namespace diffattn::vsa
