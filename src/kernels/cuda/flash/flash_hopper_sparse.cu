// Dispatch ladder of the block-sparse Hopper kernels, for each head size in kBlockSparseHeadSizes,
// bf16 and fp16: the one-warpgroup walk of listed_walk_hopper.cuh where flash_config.h's list_walk
// has one for the lists' tiling (every 64 x 64 list, 128 x 128 at hd64), else the listed walk of
// the flash kernel (128 x 128 at hd128, and dense masks; at hd128 dense masks may take the
// in-order three-group tile, dense_mask_tile).
// A translation unit of its own, so the dense and block-sparse instantiations compile in parallel.

#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_hopper.h"
#include "kernels/cuda/flash/flash_hopper_launch.cuh"
#include "kernels/cuda/flash/listed_walk_hopper.cuh"

namespace diffattn::flash {
namespace {

using hopper_detail::fail;

template <int kD, bool kBf16>
LaunchStatus launch_large(const HopperArgs& args, cudaStream_t stream) {
  constexpr HopperTile tile = block_sparse_tile(kD);
  using T = HopperTraits<kD, tile.block_n, tile.stages, kBf16, tile.consumer_warpgroups, tile.staged_epilogue,
                         tile.issue_in_turn, tile.tma_store, tile.overlap, tile.row_sum_by_mma, tile.early_exp>;
  static_assert(T::kBlockM == tile.block_m, "flash_config.h and the kernel disagree on the query tile");
  return hopper_detail::launch_with_traits<T, /*kListed=*/true>(args, stream);
}

// The one-warpgroup walk: one CTA per 64 query rows of a list's tile, head and batch entry.
template <class T>
LaunchStatus launch_walk(const HopperArgs& args, cudaStream_t stream) {
  FlashParams p = args.params;
  if (p.seqlen_q == 0 || p.batch == 0 || p.heads_q == 0) return {};
  if (p.bs_offsets == nullptr || p.bs_indices == nullptr || p.causal || p.cu_seqlens_q != nullptr ||
      p.kv_mask != nullptr || p.row_bits != nullptr)
    return fail(LaunchStatus::kInvalidInput,
                "block-sparse attention: the one-warpgroup walk needs its key lists and takes no causal, packed or "
                "masked problem");
  if (p.batch > 65535 || p.heads_q > 65535)
    return fail(LaunchStatus::kInvalidInput, "block-sparse attention: the one-warpgroup walk takes at most 65535 "
                                             "batch entries and heads; split the batch");
  p.bs_q_tiles = static_cast<int>(ceil_div(p.seqlen_q, T::kBlockN));
  const std::int64_t ctas = T::kSegmented ? p.bs_query_ctas : ceil_div(p.seqlen_q, T::kBlockM);
  if (p.bs_stride_h < 0) p.bs_stride_h = p.bs_q_tiles;
  if (p.bs_stride_b < 0) p.bs_stride_b = p.heads_q * p.bs_q_tiles;
  if (T::kSegmented != (p.bs_blocks != nullptr) ||
      (T::kSegmented && (p.bs_block_counts == nullptr || p.bs_block_first == nullptr || p.bs_query_blocks == nullptr ||
                         p.bs_query_ctas <= 0)))
    return fail(LaunchStatus::kInvalidInput, "block-sparse attention: segmented lists need their query blocks, key "
                                             "blocks and counts, and only the 64 x 64 walk takes them");
  WalkTmaMaps maps;
  LaunchStatus s = hopper_detail::make_map(&maps.q, "q", args.q, T::kBf16, T::kD, args.q_rows, p.heads_q,
                                           args.tma_batch, args.q_stride, T::kBlockM);
  if (!s.ok()) return s;
  s = hopper_detail::make_map(&maps.k, "k", args.k, T::kBf16, T::kD, args.kv_rows, p.heads_kv, args.tma_batch,
                              args.k_stride, T::kBlockN);
  if (!s.ok()) return s;
  s = hopper_detail::make_map(&maps.v, "v", args.v, T::kBf16, T::kD, args.kv_rows, p.heads_kv, args.tma_batch,
                              args.v_stride, T::kBlockN);
  if (!s.ok()) return s;
  if constexpr (T::kSegmented) {
    s = hopper_detail::make_map(&maps.q_segment, "q", args.q, T::kBf16, T::kD, args.q_rows, p.heads_q, args.tma_batch,
                                args.q_stride, kSegmentRows);
    if (!s.ok()) return s;
    s = hopper_detail::make_map(&maps.k_segment, "k", args.k, T::kBf16, T::kD, args.kv_rows, p.heads_kv,
                                args.tma_batch, args.k_stride, kSegmentRows);
    if (!s.ok()) return s;
    s = hopper_detail::make_map(&maps.v_segment, "v", args.v, T::kBf16, T::kD, args.kv_rows, p.heads_kv,
                                args.tma_batch, args.v_stride, kSegmentRows);
    if (!s.ok()) return s;
  }
  auto kernel = listed_walk::listed_walk_kernel<T>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (e != cudaSuccess)
    return fail(LaunchStatus::kCudaError,
                std::string("block-sparse attention: cannot reserve shared memory: ") + cudaGetErrorString(e));
  kernel<<<dim3(static_cast<unsigned>(ctas), p.heads_q, p.batch), T::kThreads, T::kSmemBytes, stream>>>(maps, p);
  e = cudaGetLastError();
  if (e != cudaSuccess)
    return fail(LaunchStatus::kCudaError, std::string("block-sparse attention: kernel launch failed: ") +
                                              cudaGetErrorString(e));
  return {};
}

// The walk of list_walk(kD, kTile) for lists of that tiling; on 64 x 64 lists given as segmented
// key blocks (p.bs_blocks), the walk of those.
template <int kD, bool kBf16, int kTile>
LaunchStatus launch_list_walk(const HopperArgs& args, cudaStream_t stream) {
  constexpr ListWalk walk = list_walk(kD, kTile);
  static_assert(walk.ctas_per_sm > 0, "no walk for this tiling");
  if constexpr (kTile == kSegmentTile)
    if (args.params.bs_blocks != nullptr)
      return launch_walk<WalkTraits<kD, kBf16, walk.k_bufs, walk.v_bufs, walk.ctas_per_sm, walk.block_n, true,
                                    walk.q_register_chunks>>(args, stream);
  return launch_walk<WalkTraits<kD, kBf16, walk.k_bufs, walk.v_bufs, walk.ctas_per_sm, walk.block_n, false,
                                walk.q_register_chunks>>(args, stream);
}

// Dense masks' lists of 192-row tiles at hd128: the in-order three-group tile (dense_mask_tile).
template <int kD, bool kBf16>
LaunchStatus launch_in_order(const HopperArgs& args, cudaStream_t stream) {
  if constexpr (kD == 128) {
    constexpr HopperTile tile = hopper_tile(kD, KeyTiles::kInOrder);
    using T = HopperTraits<kD, tile.block_n, tile.stages, kBf16, tile.consumer_warpgroups, tile.staged_epilogue,
                           tile.issue_in_turn, tile.tma_store, tile.overlap, tile.row_sum_by_mma, tile.early_exp>;
    static_assert(T::kBlockM == 192, "the in-order tile has 192 query rows");
    if (args.params.row_bits == nullptr)
      return fail(LaunchStatus::kInvalidInput, "the in-order listed walk takes dense masks' lists only");
    return hopper_detail::launch_with_traits<T, /*kListed=*/true>(args, stream);
  } else {
    return fail(LaunchStatus::kUnsupported, "dense-mask attention: the in-order tile is hd128's; head size " +
                                                std::to_string(kD) + " takes the 128 x 128 tile");
  }
}

template <int kD, bool kBf16>
LaunchStatus launch_tiling(const HopperArgs& args, SparseTiling tiling, cudaStream_t stream) {
  if (tiling == SparseTiling::kSmall) return launch_list_walk<kD, kBf16, kBlockSparseSmallTile>(args, stream);
  if (tiling == SparseTiling::kDenseMaskInOrder) return launch_in_order<kD, kBf16>(args, stream);
  // 128 x 128: the walk where list_walk has one, except for dense masks (row bits), which the
  // flash kernel's listed walk reads.
  if constexpr (list_walk(kD, kBlockSparseTile).ctas_per_sm > 0)
    if (args.params.row_bits == nullptr) return launch_list_walk<kD, kBf16, kBlockSparseTile>(args, stream);
  return launch_large<kD, kBf16>(args, stream);
}

template <std::size_t kIndex = 0>
LaunchStatus launch_head_size(const HopperArgs& args, SparseTiling tiling, cudaStream_t stream) {
  if constexpr (kIndex == kBlockSparseHeadSizes.size()) {
    return fail(LaunchStatus::kUnsupported, "block-sparse attention on Hopper: head size " +
                                                std::to_string(args.params.head_size) + " is not compiled; compiled: " +
                                                block_sparse_head_sizes_text());
  } else {
    constexpr int kD = kBlockSparseHeadSizes[kIndex];
    if (args.params.head_size == kD)
      return args.bf16 ? launch_tiling<kD, true>(args, tiling, stream) : launch_tiling<kD, false>(args, tiling, stream);
    return launch_head_size<kIndex + 1>(args, tiling, stream);
  }
}

}  // namespace

LaunchStatus launch_flash_hopper_block_sparse(const HopperArgs& args, SparseTiling tiling, void* stream_ptr) {
  if (args.sm_count <= 0) return fail(LaunchStatus::kInvalidInput, "block-sparse attention: sm_count must be positive");
  if (reinterpret_cast<std::uintptr_t>(args.params.out) % 4 != 0 || args.params.out_stride_s % 2 != 0 ||
      args.params.out_stride_h % 2 != 0 || args.params.out_stride_b % 2 != 0)
    return fail(LaunchStatus::kInvalidInput,
                "block-sparse attention: out must be 4-byte aligned with even batch/sequence/head strides; pass a "
                "contiguous output tensor");
  if (args.params.bs_tile_rows != nullptr && args.params.seqlen_q != args.params.seqlen_k)
    return fail(LaunchStatus::kInvalidInput, "block-sparse attention: tile rows need self-attention (Sq = Skv)");
  return launch_head_size(args, tiling, static_cast<cudaStream_t>(stream_ptr));
}

}  // namespace diffattn::flash
