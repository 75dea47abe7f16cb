#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <limits>

#include "backends/cudnn_attn/mask_bias.h"
#include "kernels/cuda/cuda_check.h"

namespace diffattn::cudnn_attn {
namespace {

constexpr int kThreads = 128;

struct MaskRows {
  const std::uint8_t* data;
  std::int64_t stride_b, stride_h, stride_q, stride_k;  // elements (bytes) of the bool mask
};

__device__ std::uint16_t minus_inf_bits(bool bf16) { return bf16 ? 0xFF80u : 0xFC00u; }

// One block per mask row: the bias row (0 kept, -inf dropped, -inf in the padding) and the row's
// first kept key.
__global__ void mask_bias_kernel(MaskRows mask, MaskBias out, bool bf16) {
  __shared__ int first;
  const std::int64_t row = blockIdx.x;
  const std::int64_t iq = row % out.mq, ih = row / out.mq % out.mh, ib = row / (out.mq * out.mh);
  const std::uint8_t* src = mask.data + ib * mask.stride_b + ih * mask.stride_h + iq * mask.stride_q;
  auto* dst = static_cast<std::uint16_t*>(out.bias) + row * out.skv_pad;
  const std::uint16_t dropped = minus_inf_bits(bf16);
  if (threadIdx.x == 0) first = INT_MAX;
  __syncthreads();
  int my_first = INT_MAX;
  std::int64_t done = 0;
  // 16 keys at a time where the row is contiguous and 16-byte aligned (the bias row always is).
  if (mask.stride_k == 1 && (reinterpret_cast<std::uintptr_t>(src) & 15) == 0) {
    const std::int64_t chunks = out.skv / 16;
    for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      const uint4 bytes = reinterpret_cast<const uint4*>(src)[c];
      const std::uint32_t words[4] = {bytes.x, bytes.y, bytes.z, bytes.w};
      std::uint16_t bits[16];
      for (int i = 0; i < 16; ++i) {
        const bool keep = ((words[i / 4] >> (8 * (i % 4))) & 0xFF) != 0;
        bits[i] = keep ? 0 : dropped;
        if (keep && my_first == INT_MAX) my_first = static_cast<int>(c * 16 + i);
      }
      uint4 lo, hi;
      lo.x = bits[0] | bits[1] << 16, lo.y = bits[2] | bits[3] << 16, lo.z = bits[4] | bits[5] << 16,
      lo.w = bits[6] | bits[7] << 16;
      hi.x = bits[8] | bits[9] << 16, hi.y = bits[10] | bits[11] << 16, hi.z = bits[12] | bits[13] << 16,
      hi.w = bits[14] | bits[15] << 16;
      reinterpret_cast<uint4*>(dst)[2 * c] = lo;
      reinterpret_cast<uint4*>(dst)[2 * c + 1] = hi;
    }
    done = chunks * 16;
  }
  for (std::int64_t j = done + threadIdx.x; j < out.skv_pad; j += blockDim.x) {
    const bool keep = j < out.skv && src[j * mask.stride_k] != 0;
    dst[j] = keep ? 0 : dropped;
    if (keep && my_first == INT_MAX) my_first = static_cast<int>(j);
  }
  if (my_first != INT_MAX) atomicMin(&first, my_first);
  __syncthreads();
  if (threadIdx.x == 0) out.first_kept[row] = first == INT_MAX ? static_cast<int>(out.skv) : first;
}

struct RowsView {
  std::uint16_t* out;
  std::int64_t out_b, out_s, out_h, out_d;
  float* lse;
  std::int64_t lse_b, lse_h, lse_s;
};

RowsView rows_view(const AttentionProblem& p) {
  RowsView v{static_cast<std::uint16_t*>(p.out.data), p.out.stride(0), p.out.stride(1), p.out.stride(2),
             p.out.stride(3), nullptr, 0, 0, 0};
  if (p.lse) {
    v.lse = static_cast<float*>(p.lse->data);
    v.lse_b = p.lse->stride(0), v.lse_h = p.lse->stride(1), v.lse_s = p.lse->stride(2);
  }
  return v;
}

// One thread per output row (b, q, h): zeros and LSE -inf where the mask row keeps no key that the
// causal limit allows.
__global__ void clear_empty_rows_kernel(RowsView v, MaskBias bias, std::int64_t sq, std::int64_t hq,
                                        std::int64_t dv, std::int64_t rows, bool causal) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::int64_t h = r % hq, q = r / hq % sq, b = r / (hq * sq);
  const std::int64_t mrow = ((bias.mb > 1 ? b : 0) * bias.mh + (bias.mh > 1 ? h : 0)) * bias.mq + (bias.mq > 1 ? q : 0);
  const std::int64_t first = bias.first_kept[mrow];
  if (first < bias.skv && !(causal && first > q)) return;
  std::uint16_t* row = v.out + b * v.out_b + q * v.out_s + h * v.out_h;
  for (std::int64_t d = 0; d < dv; ++d) row[d * v.out_d] = 0;
  if (v.lse) v.lse[b * v.lse_b + h * v.lse_h + q * v.lse_s] = -INFINITY;
}

struct Cu {
  const std::int32_t* q;
  const std::int32_t* k;
  std::int64_t q_stride, k_stride;
};

Cu cu_view(const AttentionProblem& p) {
  return {static_cast<const std::int32_t*>(p.cu_seqlens_q->data), static_cast<const std::int32_t*>(p.cu_seqlens_k->data),
          p.cu_seqlens_q->stride(0), p.cu_seqlens_k->stride(0)};
}

__global__ void ragged_offsets_kernel(Cu cu, int batches, std::int64_t q_token, std::int64_t k_token,
                                      std::int64_t v_token, std::int64_t o_token, std::int64_t heads_q,
                                      RaggedOffsets out) {
  for (int b = threadIdx.x; b <= batches; b += blockDim.x) {
    const std::int64_t q0 = cu.q[b * cu.q_stride], k0 = cu.k[b * cu.k_stride];
    out.q[b] = static_cast<std::int32_t>(q0 * q_token);
    out.k[b] = static_cast<std::int32_t>(k0 * k_token);
    out.v[b] = static_cast<std::int32_t>(k0 * v_token);
    out.o[b] = static_cast<std::int32_t>(q0 * o_token);
    out.stats[b] = static_cast<std::int32_t>(q0 * heads_q);
    if (b < batches) {
      out.seq_len_q[b] = cu.q[(b + 1) * cu.q_stride] - static_cast<std::int32_t>(q0);
      out.seq_len_kv[b] = cu.k[(b + 1) * cu.k_stride] - static_cast<std::int32_t>(k0);
    }
  }
}

// Grid (batches, chunks): each block walks part of one sequence's (token, head) rows.
__global__ void finish_ragged_kernel(Cu cu, RowsView v, const float* stats, std::int64_t hq, std::int64_t dv) {
  const int b = blockIdx.x;
  const std::int64_t q0 = cu.q[b * cu.q_stride], q1 = cu.q[(b + 1) * cu.q_stride];
  const bool no_keys = cu.k[(b + 1) * cu.k_stride] == cu.k[b * cu.k_stride];
  if (!no_keys && v.lse == nullptr) return;
  const std::int64_t rows = (q1 - q0) * hq;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; r < rows;
       r += static_cast<std::int64_t>(gridDim.y) * blockDim.x) {
    const std::int64_t t = q0 + r / hq, h = r % hq;
    if (v.lse) v.lse[h * v.lse_h + t * v.lse_s] = no_keys ? -INFINITY : stats[t * hq + h];
    if (no_keys) {
      std::uint16_t* row = v.out + t * v.out_s + h * v.out_h;
      for (std::int64_t d = 0; d < dv; ++d) row[d * v.out_d] = 0;
    }
  }
}

}  // namespace

MaskBias mask_bias_dims(const AttentionProblem& p) {
  MaskBias m;
  const TensorView& mask = *p.mask;
  m.skv = p.k.size(1);
  m.skv_pad = (m.skv + 7) / 8 * 8;
  if (mask.ndim == 2) {
    m.mb = mask.size(0);
  } else {
    m.mb = mask.size(0), m.mh = mask.size(1), m.mq = mask.size(2);
  }
  return m;
}

Status launch_mask_bias(const AttentionProblem& p, const MaskBias& out, void* stream) {
  const TensorView& mask = *p.mask;
  MaskRows rows{static_cast<const std::uint8_t*>(mask.data), 0, 0, 0, 0};
  if (mask.ndim == 2) {
    rows.stride_b = mask.stride(0), rows.stride_k = mask.stride(1);
  } else {
    rows.stride_b = mask.stride(0), rows.stride_h = mask.stride(1), rows.stride_q = mask.stride(2),
    rows.stride_k = mask.stride(3);
  }
  const std::int64_t n = out.rows();
  if (n <= 0) return Status::Ok();
  if (n > INT_MAX) return Unsupported("CUDNN_ATTN: the mask has " + std::to_string(n) + " rows, more than one launch takes");
  mask_bias_kernel<<<static_cast<unsigned>(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      rows, out, p.q.dtype == DType::kBFloat16);
  return cuda::check_launch("mask_bias_kernel");
}

Status launch_clear_empty_rows(const AttentionProblem& p, const MaskBias& bias, void* stream) {
  const std::int64_t rows = p.q.size(0) * p.q.size(1) * p.q.size(2);
  if (rows <= 0) return Status::Ok();
  const std::int64_t blocks = (rows + 255) / 256;
  clear_empty_rows_kernel<<<static_cast<unsigned>(blocks), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      rows_view(p), bias, p.q.size(1), p.q.size(2), p.out.size(3), rows, p.causal);
  return cuda::check_launch("clear_empty_rows_kernel");
}

Status launch_ragged_offsets(const AttentionProblem& p, const RaggedOffsets& out, void* stream) {
  const int batches = static_cast<int>(p.num_batches());
  ragged_offsets_kernel<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(cu_view(p), batches, p.q.stride(1),
                                                                           p.k.stride(1), p.v.stride(1),
                                                                           p.out.stride(1), p.q.size(2), out);
  return cuda::check_launch("ragged_offsets_kernel");
}

Status launch_finish_ragged(const AttentionProblem& p, const float* stats, void* stream) {
  const int batches = static_cast<int>(p.num_batches());
  if (batches <= 0) return Status::Ok();
  finish_ragged_kernel<<<dim3(static_cast<unsigned>(batches), 32), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      cu_view(p), rows_view(p), stats, p.q.size(2), p.out.size(3));
  return cuda::check_launch("finish_ragged_kernel");
}

}  // namespace diffattn::cudnn_attn
