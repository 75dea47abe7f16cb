// Tensor-core SDPA instantiations for the head-dim bucket 64 (float16 and bfloat16).
#include "kernels/cuda/dense/sdpa_mma_launch.cuh"

namespace diffattn::cuda {
template Status launch_mma_bucket<__half, 64>(const SdpaParams&, cudaStream_t);
template Status launch_mma_bucket<__nv_bfloat16, 64>(const SdpaParams&, cudaStream_t);
}  // namespace diffattn::cuda
