#include "backends/cudnn_attn/key_compaction.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace diffattn::cudnn_attn {
namespace {

constexpr int kScanThreads = 1024;

// One block per batch: each key's row in the copy, as its rank among the kept keys, or for a
// dropped key -1 - its rank among the dropped ones (its row is then count + that rank); the count.
__global__ void key_slots_kernel(const std::uint8_t* mask, std::int64_t batch_stride, std::int64_t col_stride,
                                 int seqlen_q, int seqlen_kv, KeyCompaction out) {
  __shared__ int warp_sums[kScanThreads / 32];
  __shared__ int carry;
  const int b = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < seqlen_kv; base += kScanThreads) {
    const int j = base + static_cast<int>(threadIdx.x);
    const bool keep = j < seqlen_kv && mask[b * batch_stride + j * col_stride] != 0;
    const unsigned ballot = __ballot_sync(0xffffffffu, keep);
    if (lane == 0) warp_sums[warp] = __popc(ballot);
    __syncthreads();
    int before = carry;
    for (int w = 0; w < warp; ++w) before += warp_sums[w];
    before += __popc(ballot & ((1u << lane) - 1));
    if (j < seqlen_kv) out.slot[static_cast<std::int64_t>(b) * seqlen_kv + j] = keep ? before : -1 - (j - before);
    __syncthreads();
    if (threadIdx.x == blockDim.x - 1) carry = before + (keep ? 1 : 0);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out.seq_len_q[b] = seqlen_q;
    out.seq_len_kv[b] = carry > 0 ? carry : 1;
    out.first_kept[b] = carry > 0 ? 0 : seqlen_kv;
  }
}

struct RowCopy {
  const char* src;
  char* dst;
  std::int64_t src_b, src_s, src_h;  // bytes
  int heads, row_pieces;             // 16-byte pieces per head row
};

// One warp per key row (b, j) of both tensors: a kept row is copied to its slot, 16 bytes a lane;
// a dropped one zeroes a row after the kept ones, so that every row cuDNN may load is finite (it
// multiplies the rows past a length by zero probabilities, and 0 x NaN would poison the output).
__global__ void gather_rows_kernel(RowCopy k, RowCopy v, const KeyCompaction out, int seqlen_kv, int batch) {
  const int lane = threadIdx.x % 32;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= static_cast<std::int64_t>(batch) * seqlen_kv) return;
  const std::int64_t b = row / seqlen_kv, j = row % seqlen_kv;
  const int slot = out.slot[row];
  const bool kept = slot >= 0;
  const int count = out.first_kept[b] == 0 ? out.seq_len_kv[b] : 0;
  const std::int64_t to = kept ? slot : count + (-1 - slot);
  for (const RowCopy* t : {&k, &v}) {
    const int pieces = t->heads * t->row_pieces;
    const char* src = t->src + b * t->src_b + j * t->src_s;
    char* dst = t->dst + ((b * seqlen_kv + to) * pieces) * 16;
    for (int i = lane; i < pieces; i += 32) {
      const int h = i / t->row_pieces, e = i % t->row_pieces;
      *reinterpret_cast<uint4*>(dst + static_cast<std::int64_t>(i) * 16) =
          kept ? __ldg(reinterpret_cast<const uint4*>(src + h * t->src_h + e * 16)) : make_uint4(0, 0, 0, 0);
    }
  }
}

bool whole_pieces(const TensorView& t) {
  const std::int64_t elem = 2;  // float16 / bfloat16
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0 || (t.size(3) * elem) % 16 != 0 || t.stride(3) != 1)
    return false;
  for (int d = 0; d < 3; ++d)
    if ((t.stride(d) * elem) % 16 != 0) return false;
  return true;
}

RowCopy row_copy(const TensorView& t, void* dst) {
  const std::int64_t elem = 2;
  return {static_cast<const char*>(t.data), static_cast<char*>(dst), t.stride(0) * elem, t.stride(1) * elem,
          t.stride(2) * elem, static_cast<int>(t.size(2)), static_cast<int>(t.size(3) * elem / 16)};
}

}  // namespace

bool can_compact_keys(const AttentionProblem& p) { return !p.causal && whole_pieces(p.k) && whole_pieces(p.v); }

std::int64_t compacted_k_bytes(const AttentionProblem& p) { return p.k.numel() * 2; }
std::int64_t compacted_v_bytes(const AttentionProblem& p) { return p.v.numel() * 2; }

Status launch_key_compaction(const AttentionProblem& p, const KeyCompaction& out, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const TensorView& mask = *p.mask;
  const int last = mask.ndim - 1;
  const std::int64_t batch_stride = mask.size(0) == 1 ? 0 : mask.stride(0);
  const int batch = static_cast<int>(p.q.size(0)), skv = static_cast<int>(p.k.size(1));
  key_slots_kernel<<<batch, kScanThreads, 0, s>>>(static_cast<const std::uint8_t*>(mask.data), batch_stride,
                                                 mask.stride(last), static_cast<int>(p.q.size(1)), skv, out);
  DIFFATTN_RETURN_IF_ERROR(cuda::check_launch("key_slots_kernel"));
  constexpr int kWarps = 8;
  const std::int64_t rows = static_cast<std::int64_t>(batch) * skv;
  gather_rows_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(
      row_copy(p.k, out.k), row_copy(p.v, out.v), out, skv, batch);
  return cuda::check_launch("gather_rows_kernel");
}

}  // namespace diffattn::cudnn_attn
