// Dispatch ladder of the block-sparse Hopper kernel: the listed walk of the flash kernel on the
// block-sparse tiles of each head size in kBlockSparseHeadSizes (flash_config.h: the large tile and
// the 64 x 64 per-group tile), bf16 and fp16.
// A translation unit of its own, so the dense and block-sparse instantiations compile in parallel.

#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_hopper.h"
#include "kernels/cuda/flash/flash_hopper_launch.cuh"

namespace diffattn::flash {
namespace {

using hopper_detail::fail;

template <int kD, bool kBf16, bool kSmall>
LaunchStatus launch_typed(const HopperArgs& args, cudaStream_t stream) {
  constexpr HopperTile tile = kSmall ? block_sparse_small_tile(kD) : block_sparse_tile(kD);
  using T = HopperTraits<kD, tile.block_n, tile.stages, kBf16, tile.consumer_warpgroups, tile.staged_epilogue,
                         tile.issue_in_turn, tile.tma_store, tile.overlap, tile.row_sum_by_mma, tile.early_exp,
                         /*kPolyEvery=*/0, /*kGroupKeys=*/kSmall, tile.q_in_registers>;
  static_assert(T::kBlockM == tile.block_m, "flash_config.h and the kernel disagree on the query tile");
  return hopper_detail::launch_with_traits<T, /*kListed=*/true>(args, stream);
}

template <int kD, bool kBf16>
LaunchStatus launch_tiling(const HopperArgs& args, bool small_tiles, cudaStream_t stream) {
  return small_tiles ? launch_typed<kD, kBf16, true>(args, stream) : launch_typed<kD, kBf16, false>(args, stream);
}

template <std::size_t kIndex = 0>
LaunchStatus launch_head_size(const HopperArgs& args, bool small_tiles, cudaStream_t stream) {
  if constexpr (kIndex == kBlockSparseHeadSizes.size()) {
    return fail(LaunchStatus::kUnsupported, "block-sparse attention on Hopper: head size " +
                                                std::to_string(args.params.head_size) + " is not compiled; compiled: " +
                                                block_sparse_head_sizes_text());
  } else {
    constexpr int kD = kBlockSparseHeadSizes[kIndex];
    if (args.params.head_size == kD)
      return args.bf16 ? launch_tiling<kD, true>(args, small_tiles, stream)
                       : launch_tiling<kD, false>(args, small_tiles, stream);
    return launch_head_size<kIndex + 1>(args, small_tiles, stream);
  }
}

}  // namespace

LaunchStatus launch_flash_hopper_block_sparse(const HopperArgs& args, bool small_tiles, void* stream_ptr) {
  if (args.sm_count <= 0) return fail(LaunchStatus::kInvalidInput, "block-sparse attention: sm_count must be positive");
  if (reinterpret_cast<std::uintptr_t>(args.params.out) % 4 != 0 || args.params.out_stride_s % 2 != 0 ||
      args.params.out_stride_h % 2 != 0 || args.params.out_stride_b % 2 != 0)
    return fail(LaunchStatus::kInvalidInput,
                "block-sparse attention: out must be 4-byte aligned with even batch/sequence/head strides; pass a "
                "contiguous output tensor");
  if (args.params.bs_tile_rows != nullptr && args.params.seqlen_q != args.params.seqlen_k)
    return fail(LaunchStatus::kInvalidInput, "block-sparse attention: tile rows need self-attention (Sq = Skv)");
  return launch_head_size(args, small_tiles, static_cast<cudaStream_t>(stream_ptr));
}

}  // namespace diffattn::flash
