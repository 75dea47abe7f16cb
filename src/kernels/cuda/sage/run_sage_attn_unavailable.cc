#include "kernels/cuda/sage/run_sage_attn.h"

#if !DIFFATTN_HAVE_CUDA
namespace diffattn::sage {

Status run_sage_attn_cuda(const AttentionProblem&, PvMode, void*, const SageKernelChoice&) {
  return Unavailable("SAGE_ATTN's CUDA kernels are not part of this build (nvcc was not found when it was built); "
                     "rebuild with the CUDA toolkit installed, or run SAGE_ATTN on CPU tensors");
}

Status run_sage_attn_cuda_with(const AttentionProblem& problem, PvMode pv, void* stream, int, const SageKernelLaunch&,
                               QkMode, int, bool) {
  return run_sage_attn_cuda(problem, pv, stream);
}

Status run_sage_attn_ampere_cuda(const AttentionProblem& problem, void* stream, PvMode pv) {
  return run_sage_attn_cuda(problem, pv, stream);
}

bool sage_reads_kv_once(const AttentionProblem&, int, int, QkMode) { return false; }

bool sage_cuda_kernel_for(int, int) { return false; }

Status count_division_mismatches(std::uint64_t (&)[3]) {
  return Unavailable("SAGE_ATTN's CUDA kernels are not part of this build");
}

Status run_sage_block_sparse_cuda(const AttentionProblem& problem, const flash::DeviceBlockSparseLists&, PvMode pv,
                                  void* stream) {
  return run_sage_attn_cuda(problem, pv, stream);
}

Status run_qk16_v8_cuda(const AttentionProblem&, void*, const SageKernelChoice&) {
  return Unavailable("FLASHINFER_ATTN's CUDA kernels are not part of this build (nvcc was not found when it was "
                     "built); rebuild with the CUDA toolkit installed, or run FLASHINFER_ATTN on CPU tensors");
}

bool qk16_v8_cuda_kernel_for(int, int) { return false; }

}  // namespace diffattn::sage
#endif
