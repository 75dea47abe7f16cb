// TORCH_SDPA for CUDA views: builds the kernel parameters, switches to the tensors' device and
// launches the tensor-core kernel or, for what it does not cover, the SIMT kernel.

#include "kernels/cuda/scoped_device.h"
#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/sdpa_cuda.h"

namespace diffattn {

Status run_sdpa_cuda(const AttentionProblem& problem, void* stream) {
  if (problem.q.device.kind != DeviceKind::kCuda) {
    return InvalidInput("TORCH_SDPA's CUDA kernel got CPU tensors; the CPU kernel runs those");
  }
  DIFFATTN_ASSIGN_OR_RETURN(cuda::SdpaParams params, cuda::make_sdpa_params(problem));
  cuda::ScopedDevice device;
  DIFFATTN_RETURN_IF_ERROR(device.enter(problem.q.device.index));
  return cuda::launch_sdpa(params, stream);
}

}  // namespace diffattn
