#include "kernels/cuda/sage/sage_ampere.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "kernels/cuda/sage/sage_fwd_ampere.cuh"

namespace diffattn::sage {
namespace {

template <int kD, typename T>
Status launch(const SageParams& p, cudaStream_t stream) {
  using Tile = SageAmpereTile<kD, T>;
  static_assert(Tile::kBlockM == kSageAmpereTileRows, "the host counts tiles of kSageAmpereTileRows rows");
  auto kernel = sage_fwd_ampere_kernel<Tile>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes);
  if (e != cudaSuccess) return CudaError(std::string("SAGE_ATTN: cannot reserve shared memory: ") + cudaGetErrorString(e));
  const dim3 grid(static_cast<unsigned>(p.num_m_blocks), static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(p);
  e = cudaGetLastError();
  if (e != cudaSuccess) return CudaError(std::string("SAGE_ATTN: Ampere kernel launch failed: ") + cudaGetErrorString(e));
  return Status::Ok();
}

}  // namespace

Status launch_sage_ampere(const SageParams& p, cudaStream_t stream) {
  if (p.head_size == 64) return p.bf16 ? launch<64, __nv_bfloat16>(p, stream) : launch<64, __half>(p, stream);
  if (p.head_size == 128) return p.bf16 ? launch<128, __nv_bfloat16>(p, stream) : launch<128, __half>(p, stream);
  return Unsupported("SAGE_ATTN's Ampere kernel has head sizes 64 and 128, not " + std::to_string(p.head_size) +
                     "; select TORCH_SDPA for this layer");
}

}  // namespace diffattn::sage
