// The LSE merge of ring attention's partial outputs on the device: one block per (b, s, h) row.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/merge/partial_merge.h"

namespace diffattn::merge {
namespace {

template <typename T>
__device__ float to_float(T v);
template <>
__device__ float to_float<float>(float v) { return v; }
template <>
__device__ float to_float<__half>(__half v) { return __half2float(v); }
template <>
__device__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ T from_float(float v);
template <>
__device__ float from_float<float>(float v) { return v; }
template <>
__device__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void merge_rows(float* acc_out, float* acc_lse, const T* part_out, const float* part_lse,
                           std::int64_t seqlen, std::int64_t heads, std::int64_t dv) {
  const std::int64_t row = blockIdx.x;  // (b * seqlen + s) * heads + h, the output row
  const std::int64_t h = row % heads;
  const std::int64_t bs = row / heads;
  const std::int64_t s = bs % seqlen, b = bs / seqlen;
  const std::int64_t li = (b * heads + h) * seqlen + s;
  const float la = acc_lse[li], lb = part_lse[li];
  const float m = fmaxf(la, lb);
  if (m == -INFINITY) return;  // neither side kept a key
  const float wa = la == -INFINITY ? 0.f : __expf(la - m);
  const float wb = lb == -INFINITY ? 0.f : __expf(lb - m);
  const float inv = 1.f / (wa + wb);
  float* o = acc_out + row * dv;
  const T* po = part_out + row * dv;
  for (std::int64_t d = threadIdx.x; d < dv; d += blockDim.x) o[d] = (wa * o[d] + wb * to_float(po[d])) * inv;
  // Every thread read the old LSE above; the write happens after they all have.
  __syncthreads();
  if (threadIdx.x == 0) acc_lse[li] = m + logf(wa + wb);
}

template <typename T>
__global__ void store_elements(const float* acc, T* out, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = from_float<T>(acc[i]);
}

}  // namespace

Status merge_partial_cuda(const PartialMergeParams& p, void* stream) {
  DIFFATTN_RETURN_IF_ERROR(check_partial_merge(p));
  const std::int64_t rows = p.batch * p.seqlen * p.heads;
  if (rows == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(rows)), block(128);
  switch (p.part_dtype) {
    case DType::kFloat16:
      merge_rows<<<grid, block, 0, s>>>(p.acc_out, p.acc_lse, static_cast<const __half*>(p.part_out), p.part_lse,
                                         p.seqlen, p.heads, p.head_size_v);
      break;
    case DType::kBFloat16:
      merge_rows<<<grid, block, 0, s>>>(p.acc_out, p.acc_lse, static_cast<const __nv_bfloat16*>(p.part_out),
                                         p.part_lse, p.seqlen, p.heads, p.head_size_v);
      break;
    default:
      merge_rows<<<grid, block, 0, s>>>(p.acc_out, p.acc_lse, static_cast<const float*>(p.part_out), p.part_lse,
                                         p.seqlen, p.heads, p.head_size_v);
  }
  return cuda::check_launch("merge_rows");
}

Status store_merged_cuda(const float* acc, void* out, DType dtype, std::int64_t count, void* stream) {
  if (count == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((count + 255) / 256, 65535));
  switch (dtype) {
    case DType::kFloat16: store_elements<<<blocks, 256, 0, s>>>(acc, static_cast<__half*>(out), count); break;
    case DType::kBFloat16: store_elements<<<blocks, 256, 0, s>>>(acc, static_cast<__nv_bfloat16*>(out), count); break;
    case DType::kFloat32: store_elements<<<blocks, 256, 0, s>>>(acc, static_cast<float*>(out), count); break;
    default:
      return InvalidInput("store merged output: dtype " + std::string(dtype_name(dtype)) +
                          " is not float32, float16 or bfloat16");
  }
  return cuda::check_launch("store_elements");
}

}  // namespace diffattn::merge
