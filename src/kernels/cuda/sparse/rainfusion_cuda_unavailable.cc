#include "kernels/cuda/sparse/rainfusion_cuda.h"

#if !DIFFATTN_HAVE_CUDA
namespace diffattn {

Status run_rainfusion_cuda(const AttentionProblem&, const RainFusionParams&, void*, RainFusionPlan*,
                           flash::BlockSparseKernel) {
  return Unavailable("RAINFUSION_ATTN on CUDA tensors needs diffattn's CUDA kernels, and this build has none (nvcc "
                     "was not found when it was built); rebuild with the CUDA toolkit installed, or run "
                     "RAINFUSION_ATTN on CPU tensors");
}

}  // namespace diffattn
#endif
