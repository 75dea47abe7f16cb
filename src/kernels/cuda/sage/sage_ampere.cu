#include "kernels/cuda/sage/sage_ampere.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "kernels/cuda/sage/sage_fwd_ampere.cuh"

namespace diffattn::sage {

Status launch_sage_ampere(const SageParams& p, cudaStream_t stream) {
  if (p.head_size == 64)
    return p.bf16 ? launch_sage_ampere_tile<SageAmpereTile<64, __nv_bfloat16>>(p, stream)
                  : launch_sage_ampere_tile<SageAmpereTile<64, __half>>(p, stream);
  if (p.head_size == 128)
    return p.bf16 ? launch_sage_ampere_tile<SageAmpereTile<128, __nv_bfloat16>>(p, stream)
                  : launch_sage_ampere_tile<SageAmpereTile<128, __half>>(p, stream);
  return Unsupported("SAGE_ATTN's Ampere kernel has head sizes 64 and 128, not " + std::to_string(p.head_size) +
                     "; select TORCH_SDPA for this layer");
}

}  // namespace diffattn::sage
