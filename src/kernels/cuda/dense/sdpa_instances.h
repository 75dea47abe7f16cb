#pragma once
// The compiled (dtype, head-dim bucket) instantiations of the tensor-core kernel, one line each.
// Keep in step with kCompiledHeadDims in tile_config.h and the sdpa_mma_d*.cu files.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "diffattn/status.h"
#include "kernels/cuda/dense/sdpa_params.h"

namespace diffattn::cuda {

template <typename T, int kD>
Status launch_mma_bucket(const SdpaParams& p, cudaStream_t stream);

#define DIFFATTN_SDPA_MMA_BUCKET(D)                                                     \
  extern template Status launch_mma_bucket<__half, D>(const SdpaParams&, cudaStream_t); \
  extern template Status launch_mma_bucket<__nv_bfloat16, D>(const SdpaParams&, cudaStream_t);
DIFFATTN_SDPA_MMA_BUCKET(32)
DIFFATTN_SDPA_MMA_BUCKET(64)
DIFFATTN_SDPA_MMA_BUCKET(96)
DIFFATTN_SDPA_MMA_BUCKET(128)
DIFFATTN_SDPA_MMA_BUCKET(160)
DIFFATTN_SDPA_MMA_BUCKET(192)
DIFFATTN_SDPA_MMA_BUCKET(256)
#undef DIFFATTN_SDPA_MMA_BUCKET

}  // namespace diffattn::cuda
