#pragma once
// Host entry of the Hopper flash kernel, free of diffattn's public types so that the standalone
// development harness (dev/flash_dev.cu) compiles it with nvcc alone.

#include <cstdint>
#include <string>

#include "kernels/cuda/flash/flash_params.h"

namespace diffattn::flash {

struct HopperArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  // Element strides of (batch, sequence, head); the head dimension is contiguous.
  std::int64_t q_stride[3] = {0, 0, 0};
  std::int64_t k_stride[3] = {0, 0, 0};
  std::int64_t v_stride[3] = {0, 0, 0};
  // Sequence and batch extents of the TMA maps: (Sq, B) / (Skv, B), or (total, 1) when packed.
  std::int64_t q_rows = 0, kv_rows = 0, tma_batch = 0;
  bool bf16 = true;
  int sm_count = 0;
  // Cut the last partial wave's tiles along the keys (a listed launch: along each tile's list) when
  // that shortens the run (flash_config.h, plan_tail_split). Dense launches keep it on (off only to
  // time the kernel without it); run_flash_attn.cu's listed_tail_split decides for listed ones.
  bool tail_split = true;
  FlashParams params;  // num_m_blocks / num_tiles are filled by the launcher
};

struct LaunchStatus {
  enum Code { kOk, kUnsupported, kInvalidInput, kCudaError } code = kOk;
  std::string message;
  bool ok() const { return code == kOk; }
};

// Launches on `stream` (a cudaStream_t). Checks head size, alignment and TMA limits first and
// launches nothing when they fail.
LaunchStatus launch_flash_hopper(const HopperArgs& args, void* stream);

// The compact walk's builder alone (flash_hopper_launch.cuh's compact_keys_kernel), for tests
// against its CPU oracle (kernels/sparse/compact_keys.h): a bool key mask [B, Skv] and K, V
// [B, Skv, Hkv, D] (contiguous, 16-bit, D a multiple of 8) on the device; writes block_rows
// [B, ceil(Skv / block_n)], count [B] and the gathered copies [B, ceil(Skv / block_n) * block_n,
// Hkv, D] of K and V. block_n: a key tile of the Hopper kernel (80, 96, 128 or 176).
LaunchStatus build_compact_keys_cuda(const std::uint8_t* mask, int batch, int seqlen_k, int heads_kv, int head_size,
                                     int block_n, const void* k, const void* v, std::int32_t* block_rows,
                                     std::int32_t* count, void* kg, void* vg, int sm_count, void* stream);

// The tilings of the block-sparse launch (flash_config.h): 128 x 128 lists (the flash kernel's
// tiles at hd128 and for dense masks, the one-warpgroup walk at hd64) and 64 x 64 lists (the
// one-warpgroup walk, listed_walk_hopper.cuh).
// kLarge: block_sparse_tile(head_size); kSmall: 64 x 64; kDenseMaskInOrder: hd128's in-order
// three-group tile (192 x 128), for dense masks' lists (flash_config.h, dense_mask_tile).
enum class SparseTiling { kLarge, kSmall, kDenseMaskInOrder };

// Block-sparse attention (flash_hopper_sparse.cu): args.params.bs_offsets and bs_indices (and
// bs_tile_rows) hold the key lists on the device, built for block_sparse_tile(head_size), or for
// 64 x 64 tiles (kBlockSparseSmallTile) with SparseTiling::kSmall; the caller has checked them against
// the problem. Head sizes kBlockSparseHeadSizes; no causal, packed or key-masked problems.
LaunchStatus launch_flash_hopper_block_sparse(const HopperArgs& args, SparseTiling tiling, void* stream);

}  // namespace diffattn::flash
