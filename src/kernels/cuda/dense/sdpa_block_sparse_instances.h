#pragma once
// The compiled instantiations of the block-sparse walk of the tensor-core kernel, one line per
// (head size, list tile). Keep in step with kListedHeadDims and kListTiles (tile_config.h) and the
// sdpa_block_sparse_d*.cu files.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "diffattn/status.h"
#include "kernels/cuda/dense/sdpa_params.h"

namespace diffattn::cuda {

template <typename T, int kD, int kListTile>
Status launch_mma_block_sparse(const SdpaParams& p, cudaStream_t stream);

#define DIFFATTN_SDPA_LISTED(D, TILE)                                                              \
  extern template Status launch_mma_block_sparse<__half, D, TILE>(const SdpaParams&, cudaStream_t); \
  extern template Status launch_mma_block_sparse<__nv_bfloat16, D, TILE>(const SdpaParams&, cudaStream_t);
DIFFATTN_SDPA_LISTED(64, 64)
DIFFATTN_SDPA_LISTED(64, 128)
DIFFATTN_SDPA_LISTED(128, 64)
DIFFATTN_SDPA_LISTED(128, 128)
#undef DIFFATTN_SDPA_LISTED

}  // namespace diffattn::cuda
