#include "kernels/cuda/sdpa_cuda.h"

#if !DIFFATTN_HAVE_CUDA
namespace diffattn {

Status run_sdpa_cuda(const AttentionProblem&, void*) {
  return Unavailable("this diffattn build has no CUDA kernels (nvcc was not found when it was built); "
                     "pass CPU tensors or rebuild with the CUDA toolkit installed");
}

}  // namespace diffattn
#endif
