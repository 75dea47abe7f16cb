#include "kernels/cuda/sage/sage_ampere.h"

#include "kernels/cuda/sage/sage_fwd_ampere.cuh"

namespace diffattn::sage {

Status launch_sage_ampere(const SageParams& p, cudaStream_t stream) {
  return launch_sage_ampere_mode</*kFp8=*/false, /*kQk16=*/false>(p, stream, "SAGE_ATTN's Ampere kernel");
}

}  // namespace diffattn::sage
