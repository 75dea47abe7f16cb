#pragma once
// FLASH_ATTN on CUDA views: the Hopper kernel (wgmma + TMA) on sm_90 and the mma.sync kernel on
// sm_80..sm_89.

#include <cstdint>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/sparse/block_sparse_layout.h"
#include "kernels/sparse/segmented_key_blocks.h"

namespace diffattn::flash {

// `problem` has passed validate_problem. Checks everything FLASH_ATTN needs before it launches,
// so on error `out` and `lse` are untouched. In a build without CUDA this returns kUnavailable.
Status run_flash_attn_cuda(const AttentionProblem& problem, void* stream);

// The sm_80..sm_89 (mma.sync) kernel on any device from sm_80 on, with the same checks. FLASH_ATTN
// dispatches to it on Ampere and Ada; calling it directly lets that kernel be checked on a newer GPU.
Status run_flash_attn_ampere_cuda(const AttentionProblem& problem, void* stream);

// Which block-sparse kernel runs: the device's (Hopper's on sm_90, the mma.sync walk on sm_80..sm_89),
// or the mma.sync walk on any device from sm_80 on, which lets that kernel be checked on a newer GPU.
enum class BlockSparseKernel { kForDevice, kAmpere };

// Whether device `device` has the block-sparse kernel `kernel` asks for; the message names what to
// run instead. For callers that must refuse before their own launches.
Status check_block_sparse_device(int device, BlockSparseKernel kernel);

// Block-sparse attention on the Hopper kernel (sm_90) or the mma.sync walk (sm_80..sm_89; `kernel`):
// each query tile attends only to the key tiles its list names (kernels/sparse/block_sparse_layout.h),
// the result run_block_sparse_cpu's within the inputs' precision. Both kernels take the same lists.
// Two tilings (kernels/cuda/flash/flash_config.h; on Hopper):
//  - 128 x 128 (block_sparse_tile, kBlockSparseTile), hd64 and hd128: about 95 % of dense
//    FLASH_ATTN's TFLOP/s on the FLOPs it computes;
//  - 64 x 64 (kBlockSparseSmallTile), hd64 and hd128, for FASTVIDEO_VSA's 64-token cubes: one
//    warpgroup per CTA walks its own 64-row query tile's list, three or four CTAs per SM
//    (listed_walk_hopper.cuh); about 0.74-0.84 of dense FLASH_ATTN's TFLOP/s.
// The mma.sync walk (kernels/cuda/dense/sdpa_mma_kernel.cuh) runs one CTA per query tile of either
// tiling, over the listed tiles' key blocks.
// tile_rows (self-attention over padded tiles, Sq = Skv) is honoured on the key side: keys past a
// tile's valid rows are never attended. Padding query rows are computed like any other row (their
// out and lse rows get finite values that mean nothing), unlike on the CPU, which leaves them as
// they were: callers that gather into padded buffers discard them.
// Causal, key-masked and packed problems are refused. Everything is checked before anything runs;
// the lists go to the device on `stream` for this call.
Status run_block_sparse_cuda(const AttentionProblem& problem, const BlockSparseLayout& layout, void* stream,
                             BlockSparseKernel kernel = BlockSparseKernel::kForDevice);

// The same with lists already on the problem's device (offsets: batch * heads * q_tiles + 1 entries,
// indices: offsets' last entry; tile_rows: optional, q_tiles entries), for
// callers that build or keep them there. Only the shapes are checked: the entries must be a valid
// layout (check_block_sparse_layout), which is not verified.
// segmented (optional, 64 x 64 lists with tile rows): the same lists segmented on the device
// (build_segmented_lists_cuda), which the Hopper walk then runs: a partial tile costs its 16-row
// segments, not a whole 64-row tile, as queries and as keys. The mma.sync walk reads indices and
// tile_rows as always.
struct DeviceBlockSparseLists {
  int q_tile = 0, k_tile = 0;
  const std::int32_t* offsets = nullptr;
  const std::int32_t* indices = nullptr;
  const std::int32_t* tile_rows = nullptr;
  const SegmentedLists* segmented = nullptr;
};
Status run_block_sparse_cuda(const AttentionProblem& problem, const DeviceBlockSparseLists& lists, void* stream,
                             BlockSparseKernel kernel = BlockSparseKernel::kForDevice);

// Fills the buffers of `segmented` (plan_segmented_lists' sizes for these lists' tile rows and
// longest list; device pointers) from `lists` (offsets, indices, tile_rows of 64 x 64 lists, one list
// per (batch, query head, tile)) on `stream`: the words of kernels/sparse/segmented_key_blocks.h's
// host functions. The entries must be a valid layout no longer than the plan's, which is not verified.
Status build_segmented_lists_cuda(const DeviceBlockSparseLists& lists, const SegmentedLists& segmented, void* stream);

// Attention under a dense keep-mask [B|1, H|1, Sq, Skv] on the Hopper kernel (sm_90; head sizes
// kBlockSparseHeadSizes, Dv = D; not causal, not packed): the mask is packed to bits per query row
// and each query tile walks only the key blocks that keep a key for one of its rows
// (kernels/cuda/flash/dense_mask.h), reading the bits only in blocks that also drop one. Rows
// whose every key is masked give zeros and LSE -inf. The lists are built on `stream` for this call.
Status run_dense_mask_cuda(const AttentionProblem& problem, void* stream);

// Every problem validate_problem accepts with masks of either kind, on diffattn's kernels: dense
// masks through run_dense_mask_cuda on Hopper at its head sizes and through the mma.sync kernel
// (which reads the mask's bytes) elsewhere from sm_80; the rest (no mask, key padding, packed
// batches, causal) as run_flash_attn_cuda. `ampere_kernel`: the mma.sync kernel on any device from
// sm_80 (FLASHINFER_ATTN's 'fa2'). FLASHINFER_ATTN's CUDA path.
Status run_masked_cuda(const AttentionProblem& problem, void* stream, bool ampere_kernel = false);

}  // namespace diffattn::flash
