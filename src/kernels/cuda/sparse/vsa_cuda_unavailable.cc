#include "kernels/cuda/sparse/vsa_cuda.h"

#if !DIFFATTN_HAVE_CUDA
namespace diffattn {

Status run_fastvideo_vsa_cuda(const AttentionProblem&, std::int64_t, void*, BlockSparseLayout*,
                              flash::BlockSparseKernel, std::int64_t) {
  return Unavailable("FASTVIDEO_VSA on CUDA tensors needs diffattn's CUDA kernels, and this build has none (nvcc was "
                     "not found when it was built); rebuild with the CUDA toolkit installed, or run FASTVIDEO_VSA on "
                     "CPU tensors");
}

}  // namespace diffattn
#endif
