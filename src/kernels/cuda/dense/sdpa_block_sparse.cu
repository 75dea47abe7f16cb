// The block-sparse walk of the tensor-core kernel (FLASH_ATTN's block-sparse kernel on Ampere and
// Ada): its checks and the one dispatch ladder from run-time (dtype, head size, list tile) to the
// instantiations of sdpa_block_sparse_instances.h.

#include <string>

#include "common/reason.h"
#include "kernels/cuda/dense/sdpa_block_sparse_instances.h"
#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/dense/tile_config.h"

namespace diffattn::cuda {
namespace {

std::string listed_text() {
  return "head sizes " + join(kListedHeadDims, ", ", "", [](int d) { return std::to_string(d); }) +
         " (values of the same size) with list tiles of " +
         join(kListTiles, " or ", "", [](int t) { return std::to_string(t); }) + " rows";
}

template <typename T, int kD, std::size_t kIndex = 0>
Status dispatch_tile(const SdpaParams& p, int list_tile, cudaStream_t stream) {
  if constexpr (kIndex == kListTiles.size()) {
    return Unsupported("the block-sparse walk has no kernel for lists of " + std::to_string(list_tile) +
                       "-row tiles; compiled: " + listed_text());
  } else {
    if (list_tile == kListTiles[kIndex]) return launch_mma_block_sparse<T, kD, kListTiles[kIndex]>(p, stream);
    return dispatch_tile<T, kD, kIndex + 1>(p, list_tile, stream);
  }
}

template <typename T, std::size_t kIndex = 0>
Status dispatch_head(const SdpaParams& p, int list_tile, cudaStream_t stream) {
  if constexpr (kIndex == kListedHeadDims.size()) {
    return Unsupported("the block-sparse walk has no kernel for head size " + std::to_string(p.head_dim) +
                       "; compiled: " + listed_text());
  } else {
    if (p.head_dim == kListedHeadDims[kIndex] && p.head_dim_v == p.head_dim)
      return dispatch_tile<T, kListedHeadDims[kIndex]>(p, list_tile, stream);
    return dispatch_head<T, kIndex + 1>(p, list_tile, stream);
  }
}

}  // namespace

Status launch_sdpa_mma_block_sparse(const SdpaParams& p, int list_tile, void* stream) {
  if (auto reasons = mma_path_reasons(p); !reasons.empty())
    return Unsupported("the block-sparse walk of the tensor-core kernel cannot run this problem: " +
                       reasons_text(reasons));
  if (p.causal || p.mask != nullptr || p.cu_seqlens_q != nullptr)
    return Unsupported("the block-sparse walk takes no causal, masked or packed problem; express such keys in the "
                       "block lists");
  if (p.bs_offsets == nullptr || p.bs_indices == nullptr)
    return InvalidInput("the block-sparse walk needs its key lists' offsets and indices on the device");
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads_q == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  if (p.dtype == DType::kFloat16) return dispatch_head<__half>(p, list_tile, s);
  if (p.dtype == DType::kBFloat16) return dispatch_head<__nv_bfloat16>(p, list_tile, s);
  return Unsupported("the block-sparse walk takes float16 or bfloat16");
}

}  // namespace diffattn::cuda
