// SAGE_ATTN's Ampere/Ada kernel in its FP8 P*V mode (sage_fwd_ampere.cuh with kFp8), and with kQk16
// FLASHINFER_ATTN's QK16/V8 mode, for GPUs with FP8 tensor cores from sm_89 on. This file is compiled for compute_89 as well as the library's
// architectures (src/CMakeLists.txt); its sm_80 code traps and is never launched there.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/sage/sage_ampere.h"
#include "kernels/cuda/sage/sage_fwd_ampere.cuh"

namespace diffattn::sage {

Status launch_sage_ada_fp8(const SageParams& p, cudaStream_t stream) {
  if (p.head_size == 64)
    return p.bf16 ? launch_sage_ampere_tile<SageAmpereTile<64, __nv_bfloat16, true>>(p, stream)
                  : launch_sage_ampere_tile<SageAmpereTile<64, __half, true>>(p, stream);
  if (p.head_size == 128)
    return p.bf16 ? launch_sage_ampere_tile<SageAmpereTile<128, __nv_bfloat16, true>>(p, stream)
                  : launch_sage_ampere_tile<SageAmpereTile<128, __half, true>>(p, stream);
  return Unsupported("SAGE_ATTN's Ada kernel has head sizes 64 and 128, not " + std::to_string(p.head_size) +
                     "; select TORCH_SDPA for this layer");
}

Status launch_qk16_v8_ada(const SageParams& p, cudaStream_t stream) {
  if (p.head_size == 64)
    return p.bf16 ? launch_sage_ampere_tile<SageAmpereTile<64, __nv_bfloat16, true, true>>(p, stream)
                  : launch_sage_ampere_tile<SageAmpereTile<64, __half, true, true>>(p, stream);
  if (p.head_size == 128)
    return p.bf16 ? launch_sage_ampere_tile<SageAmpereTile<128, __nv_bfloat16, true, true>>(p, stream)
                  : launch_sage_ampere_tile<SageAmpereTile<128, __half, true, true>>(p, stream);
  return Unsupported("FLASHINFER_ATTN's QK16/V8 Ada kernel has head sizes 64 and 128, not " +
                     std::to_string(p.head_size) + "; select TORCH_SDPA for this layer");
}

}  // namespace diffattn::sage
