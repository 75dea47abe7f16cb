#pragma once
// The launch of SAGE_ATTN's Ampere/Ada kernel (sage_fwd_ampere.cuh, instantiated in sage_ampere.cu).

#include <cuda_runtime.h>

#include "diffattn/status.h"
#include "kernels/cuda/sage/sage_params.h"

namespace diffattn::sage {

inline constexpr int kSageAmpereTileRows = 64;  // query rows per CTA: four warps of 16

// p.num_m_blocks counts tiles of kSageAmpereTileRows rows; the workspace holds INT8 Q and K.
Status launch_sage_ampere(const SageParams& p, cudaStream_t stream);

}  // namespace diffattn::sage
