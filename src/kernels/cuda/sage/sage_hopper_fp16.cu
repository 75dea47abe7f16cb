#include "kernels/cuda/sage/sage_hopper_launch.cuh"

namespace diffattn::sage {

Status launch_sage_hopper_fp16(const SageParams& p, int sm_count, cudaStream_t stream) {
  return launch_sage_hopper_mode<false>(p, sm_count, stream);
}

}  // namespace diffattn::sage
