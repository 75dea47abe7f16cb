// The SIMT TORCH_SDPA kernel: one warp per query row, fp32 accumulation, any of the three float
// dtypes, head sizes up to 512, any strides and any scale. It is the exact path behind the
// tensor-core kernel for what that kernel does not cover (fp32 inputs, odd head sizes, strided
// head dimensions), so it favours generality over speed.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/dense/tile_config.h"

namespace diffattn::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kPerLane = kMaxGenericHeadDim / 32;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

template <typename T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) sdpa_generic_kernel(const SdpaParams p) {
  const int lane = threadIdx.x % 32;
  const int i = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int hq = blockIdx.y;
  const int b = blockIdx.z;
  const int hkv = hq / (p.heads_q / p.heads_kv);

  int q_start = 0, kv_start = 0, seqlen_q = p.seqlen_q, seqlen_kv = p.seqlen_kv;
  if (p.cu_seqlens_q != nullptr) {
    q_start = p.cu_seqlens_q[b];
    seqlen_q = p.cu_seqlens_q[b + 1] - q_start;
    kv_start = p.cu_seqlens_k[b];
    seqlen_kv = p.cu_seqlens_k[b + 1] - kv_start;
  }
  if (i >= seqlen_q) return;

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + (q_start + i) * p.q_row_stride +
               hq * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + kv_start * p.k_row_stride +
               hkv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + kv_start * p.v_row_stride +
               hkv * p.v_head_stride;
  const std::uint8_t* mask_row =
      p.mask == nullptr ? nullptr
                        : p.mask + b * p.mask_batch_stride + hq * p.mask_head_stride + i * p.mask_row_stride;

  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int d = lane + 32 * c;
    qr[c] = d < p.head_dim ? to_float(q[d * p.q_col_stride]) : 0.f;
    acc[c] = 0.f;
  }

  float m = -INFINITY, l = 0.f;
  const int n_end = p.causal ? min(seqlen_kv, i + 1) : seqlen_kv;
  for (int j0 = 0; j0 < n_end; j0 += 32) {
    const int count = min(32, n_end - j0);
    float my_logit = -INFINITY;  // lane jj holds the logit of key j0 + jj
    for (int jj = 0; jj < count; ++jj) {
      const int j = j0 + jj;
      const T* kr = k + j * p.k_row_stride;
      float partial = 0.f;
#pragma unroll
      for (int c = 0; c < kPerLane; ++c) {
        const int d = lane + 32 * c;
        if (d < p.head_dim) partial = fmaf(qr[c], to_float(kr[d * p.k_col_stride]), partial);
      }
      const float logit = warp_sum(partial) * p.scale;
      const bool keep = mask_row == nullptr || mask_row[j * p.mask_col_stride] != 0;
      if (lane == jj) my_logit = keep ? logit : -INFINITY;
    }
    const float m_new = fmaxf(m, warp_max(my_logit));
    if (m_new == -INFINITY) continue;  // every key so far is masked out
    const float alpha = expf(m - m_new);
    const float prob = expf(my_logit - m_new);
    l = l * alpha + warp_sum(prob);
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) acc[c] *= alpha;
    for (int jj = 0; jj < count; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, prob, jj);
      if (pj == 0.f) continue;
      const T* vr = v + (j0 + jj) * p.v_row_stride;
#pragma unroll
      for (int c = 0; c < kPerLane; ++c) {
        const int d = lane + 32 * c;
        if (d < p.head_dim_v) acc[c] = fmaf(pj, to_float(vr[d * p.v_col_stride]), acc[c]);
      }
    }
    m = m_new;
  }

  const float inv = l > 0.f ? 1.f / l : 0.f;
  T* out = static_cast<T*>(p.out) + b * p.o_batch_stride + (q_start + i) * p.o_row_stride + hq * p.o_head_stride;
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int d = lane + 32 * c;
    if (d < p.head_dim_v) out[d * p.o_col_stride] = from_float<T>(acc[c] * inv);
  }
  if (p.lse != nullptr && lane == 0) {
    p.lse[b * p.lse_batch_stride + hq * p.lse_head_stride + (q_start + i) * p.lse_row_stride] =
        l > 0.f ? m + logf(l) : -INFINITY;
  }
}

template <typename T>
Status launch_generic_typed(const SdpaParams& p, cudaStream_t stream, const char* name) {
  const dim3 grid(ceil_div(p.seqlen_q, kWarpsPerBlock), p.heads_q, p.batch);
  sdpa_generic_kernel<T><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(p);
  return check_launch(name);
}

}  // namespace

Status launch_sdpa_generic(const SdpaParams& p, void* stream) {
  if (p.head_dim > kMaxGenericHeadDim || p.head_dim_v > kMaxGenericHeadDim) {
    return Unsupported("TORCH_SDPA on CUDA supports head sizes up to " + std::to_string(kMaxGenericHeadDim) +
                       ", got " + std::to_string(p.head_dim) + "/" + std::to_string(p.head_dim_v) +
                       "; split the head dimension or run on the CPU");
  }
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads_q == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case DType::kFloat32: return launch_generic_typed<float>(p, s, "sdpa_generic_kernel<float32>");
    case DType::kFloat16: return launch_generic_typed<__half>(p, s, "sdpa_generic_kernel<float16>");
    case DType::kBFloat16: return launch_generic_typed<__nv_bfloat16>(p, s, "sdpa_generic_kernel<bfloat16>");
    default: break;
  }
  return Unsupported("TORCH_SDPA on CUDA runs float32, float16 and bfloat16; got " + std::string(dtype_name(p.dtype)) +
                     ": convert the inputs to one of those");
}

}  // namespace diffattn::cuda
