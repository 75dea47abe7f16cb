// SAGE_ATTN's Ampere/Ada kernel in its FP8 P*V mode (sage_fwd_ampere.cuh with kFp8), and with kQk16
// FLASHINFER_ATTN's QK16/V8 mode, for GPUs with FP8 tensor cores from sm_89 on. This file is
// compiled for compute_89 as well as the library's architectures (src/CMakeLists.txt); its sm_80
// code traps and is never launched there.
#include "kernels/cuda/sage/sage_ampere.h"
#include "kernels/cuda/sage/sage_fwd_ampere.cuh"

namespace diffattn::sage {

Status launch_sage_ada_fp8(const SageParams& p, cudaStream_t stream) {
  return launch_sage_ampere_mode</*kFp8=*/true, /*kQk16=*/false>(p, stream, "SAGE_ATTN's Ada kernel");
}

Status launch_qk16_v8_ada(const SageParams& p, cudaStream_t stream) {
  return launch_sage_ampere_mode</*kFp8=*/true, /*kQk16=*/true>(p, stream, "FLASHINFER_ATTN's QK16/V8 Ada kernel");
}

}  // namespace diffattn::sage
