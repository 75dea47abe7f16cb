#include <string>

#include "kernels/cuda/sage/sage_hopper_launch.cuh"

namespace diffattn::sage {

namespace {

template <bool kQk16>
Status launch_g4(const SageParams& p, int sm_count, cudaStream_t stream) {
  if (p.head_size != 64 || p.fused_q)
    return InvalidInput(std::string(kQk16 ? kQk16V8Name : kSageName) +
                        ": four consumer groups run hd64 with the Q pass only, not head size " +
                        std::to_string(p.head_size));
  return p.bf16 ? launch_sage_hopper<SageTraits<64, true, true, 4, kQk16>>(p, sm_count, stream)
                : launch_sage_hopper<SageTraits<64, false, true, 4, kQk16>>(p, sm_count, stream);
}

}  // namespace

Status launch_sage_hopper_fp8_g4(const SageParams& p, int sm_count, cudaStream_t stream) {
  return launch_g4<false>(p, sm_count, stream);
}

Status launch_qk16_v8_hopper_g4(const SageParams& p, int sm_count, cudaStream_t stream) {
  return launch_g4<true>(p, sm_count, stream);
}

}  // namespace diffattn::sage
