#include "kernels/cuda/sage/sage_hopper_launch.cuh"

namespace diffattn::sage {

Status launch_qk16_v8_hopper_g2(const SageParams& p, int sm_count, cudaStream_t stream) {
  return launch_sage_hopper_mode</*kPvFp8=*/true, 2, /*kQk16=*/true>(p, sm_count, stream);
}

}  // namespace diffattn::sage
