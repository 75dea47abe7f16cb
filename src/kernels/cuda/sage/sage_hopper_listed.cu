// The block-sparse walk of SAGE_ATTN's Hopper kernel (two consumer groups, 128 x 128 tiles) in
// both P*V modes: hd64 / hd128 x bf16 / fp16, one dispatch ladder. A translation unit of its own,
// compiled in parallel with the dense instantiations.
#include "kernels/cuda/sage/sage_hopper_launch.cuh"

namespace diffattn::sage {
namespace {

template <int kD, bool kBf16, bool kPvFp8>
using ListedTraits = SageTraits<kD, kBf16, kPvFp8, /*kConsumers=*/2, /*kQk16=*/false, /*kPolyEvery=*/4,
                                /*kListed=*/true>;

template <bool kPvFp8>
Status launch_mode(const SageParams& p, int sm_count, cudaStream_t stream) {
  if (p.head_size == 64)
    return p.bf16 ? launch_sage_hopper<ListedTraits<64, true, kPvFp8>>(p, sm_count, stream)
                  : launch_sage_hopper<ListedTraits<64, false, kPvFp8>>(p, sm_count, stream);
  if (p.head_size == 128)
    return p.bf16 ? launch_sage_hopper<ListedTraits<128, true, kPvFp8>>(p, sm_count, stream)
                  : launch_sage_hopper<ListedTraits<128, false, kPvFp8>>(p, sm_count, stream);
  return Unsupported(std::string(kSageName) + "'s block-sparse Hopper kernel has head sizes 64 and 128, not " +
                     std::to_string(p.head_size));
}

}  // namespace

Status launch_sage_hopper_listed(const SageParams& p, bool pv_fp8, int sm_count, cudaStream_t stream) {
  if (p.bs_offsets == nullptr || p.bs_indices == nullptr)
    return InvalidInput(std::string(kSageName) + "'s block-sparse kernel needs its key lists on the device");
  return pv_fp8 ? launch_mode<true>(p, sm_count, stream) : launch_mode<false>(p, sm_count, stream);
}

}  // namespace diffattn::sage
