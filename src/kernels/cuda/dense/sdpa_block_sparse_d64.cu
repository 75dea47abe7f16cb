// Block-sparse walk instantiations of the tensor-core kernel for head size 64 (float16 and
// bfloat16, 64- and 128-row list tiles).
#include "kernels/cuda/dense/sdpa_mma_launch.cuh"

namespace diffattn::cuda {
template Status launch_mma_block_sparse<__half, 64, 64>(const SdpaParams&, cudaStream_t);
template Status launch_mma_block_sparse<__nv_bfloat16, 64, 64>(const SdpaParams&, cudaStream_t);
template Status launch_mma_block_sparse<__half, 64, 128>(const SdpaParams&, cudaStream_t);
template Status launch_mma_block_sparse<__nv_bfloat16, 64, 128>(const SdpaParams&, cudaStream_t);
}  // namespace diffattn::cuda
