#include "kernels/cuda/sage/sage_hopper_launch.cuh"

namespace diffattn::sage {

Status launch_sage_hopper_fp16_g3(const SageParams& p, int sm_count, cudaStream_t stream) {
  return launch_sage_hopper_mode</*kPvFp8=*/false, 3>(p, sm_count, stream);
}

}  // namespace diffattn::sage
