#include <cuda_runtime.h>

#include "backends/cudnn_attn/key_padding_lengths.h"
#include "kernels/cuda/cuda_check.h"

namespace diffattn::cudnn_attn {
namespace {

constexpr int kThreads = 256;

// One block per batch: the last kept key.
__global__ void key_padding_lengths_kernel(const std::uint8_t* mask, std::int64_t batch_stride,
                                           std::int64_t col_stride, int seqlen_q, int seqlen_kv,
                                           KeyPaddingLengths out) {
  __shared__ int last_kept;
  const int b = blockIdx.x;
  if (threadIdx.x == 0) last_kept = -1;
  __syncthreads();
  int my_last_kept = -1;
  for (int j = threadIdx.x; j < seqlen_kv; j += kThreads)
    if (mask[b * batch_stride + j * col_stride] != 0) my_last_kept = j;
  atomicMax(&last_kept, my_last_kept);
  __syncthreads();
  if (threadIdx.x == 0) {
    out.seq_len_q[b] = seqlen_q;
    out.seq_len_kv[b] = max(last_kept + 1, 1);
  }
}

}  // namespace

Status launch_key_padding_lengths(const std::uint8_t* mask, std::int64_t batch_stride, std::int64_t col_stride,
                                  int batch, int seqlen_q, int seqlen_kv, const KeyPaddingLengths& out,
                                  void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  key_padding_lengths_kernel<<<batch, kThreads, 0, s>>>(mask, batch_stride, col_stride, seqlen_q, seqlen_kv, out);
  return cuda::check_launch("key_padding_lengths_kernel");
}

}  // namespace diffattn::cudnn_attn
