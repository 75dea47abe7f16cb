#include "kernels/cuda/sage/sage_hopper_launch.cuh"

namespace diffattn::sage {

Status launch_sage_hopper_fp8(const SageParams& p, int sm_count, cudaStream_t stream) {
  return launch_sage_hopper_mode<true>(p, sm_count, stream);
}

}  // namespace diffattn::sage
