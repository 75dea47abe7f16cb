#include "kernels/cuda/flash/run_flash_attn.h"

#if !DIFFATTN_HAVE_CUDA
namespace diffattn::flash {

Status run_flash_attn_cuda(const AttentionProblem&, void*) {
  return Unavailable("FLASH_ATTN needs diffattn's CUDA kernels, and this build has none (nvcc was not found when it "
                     "was built); rebuild with the CUDA toolkit installed or select TORCH_SDPA");
}

Status run_flash_attn_ampere_cuda(const AttentionProblem& problem, void* stream) {
  return run_flash_attn_cuda(problem, stream);
}

namespace {
Status no_block_sparse_kernels() {
  return Unavailable("block-sparse attention on CUDA tensors needs diffattn's CUDA kernels, and this build has none "
                     "(nvcc was not found when it was built); rebuild with the CUDA toolkit installed or run on CPU "
                     "tensors");
}
}  // namespace

Status check_block_sparse_device(int, BlockSparseKernel) { return no_block_sparse_kernels(); }

Status run_block_sparse_cuda(const AttentionProblem&, const BlockSparseLayout&, void*, BlockSparseKernel) {
  return no_block_sparse_kernels();
}

Status run_block_sparse_cuda(const AttentionProblem&, const DeviceBlockSparseLists&, void*, BlockSparseKernel) {
  return no_block_sparse_kernels();
}

Status build_segmented_lists_cuda(const DeviceBlockSparseLists&, const SegmentedLists&, void*) {
  return no_block_sparse_kernels();
}

Status run_dense_mask_cuda(const AttentionProblem& problem, void* stream) {
  return run_flash_attn_cuda(problem, stream);
}

Status run_masked_cuda(const AttentionProblem& problem, void* stream, bool) { return run_flash_attn_cuda(problem, stream); }

}  // namespace diffattn::flash
#endif
