#include "kernels/merge/partial_merge.h"

#if !DIFFATTN_HAVE_CUDA
namespace diffattn::merge {

Status merge_partial_cuda(const PartialMergeParams&, void*) {
  return Unavailable("this diffattn build has no CUDA kernels (nvcc was not found when it was built); merge "
                     "partial outputs of CPU tensors, or rebuild with the CUDA toolkit installed");
}

Status store_merged_cuda(const float*, void*, DType, std::int64_t, void*) {
  return Unavailable("this diffattn build has no CUDA kernels (nvcc was not found when it was built); "
                     "rebuild with the CUDA toolkit installed");
}

}  // namespace diffattn::merge
#endif
