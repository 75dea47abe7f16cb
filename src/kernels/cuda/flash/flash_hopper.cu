// Dispatch ladder of the Hopper flash kernel: the instantiations (head size x dtype) come from here.

#include "kernels/cuda/flash/flash_hopper.h"

#include <type_traits>

#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_hopper_launch.cuh"

namespace diffattn::flash {
namespace {

using hopper_detail::fail;

template <int kD, bool kBf16, KeyTiles kKeys>
LaunchStatus launch_typed(const HopperArgs& args, cudaStream_t stream) {
  constexpr HopperTile tile = hopper_tile(kD, kKeys);
  using T = HopperTraits<kD, tile.block_n, tile.stages, kBf16, tile.consumer_warpgroups, tile.staged_epilogue,
                           tile.issue_in_turn, tile.tma_store, tile.overlap, tile.row_sum_by_mma,
                           tile.early_exp>;
  static_assert(T::kSmemBytes == hopper_smem_bytes(tile, kD), "flash_config.h and the kernel disagree on smem");
  return hopper_detail::launch_with_traits<T>(args, stream);
}

template <int kD, KeyTiles kKeys>
LaunchStatus launch_keys(const HopperArgs& args, cudaStream_t stream) {
  return args.bf16 ? launch_typed<kD, true, kKeys>(args, stream) : launch_typed<kD, false, kKeys>(args, stream);
}

// hd64/hd192/hd256 have one tile whatever the shape; hd96 has two and hd128 four.
template <int kD>
LaunchStatus launch_dtype(const HopperArgs& args, cudaStream_t stream) {
  if constexpr (kD == 96 || kD == 128) {
    const FlashParams& p = args.params;
    const KeyTiles keys = key_masked_tiles(
        kD, choose_key_tiles(kD, p.seqlen_q, p.seqlen_k, std::int64_t{p.batch} * p.heads_q, args.sm_count, p.causal),
        p.kv_mask != nullptr, p.causal);
    if constexpr (kD == 128) {
      if (keys == KeyTiles::kInOrder) return launch_keys<kD, KeyTiles::kInOrder>(args, stream);
      if (keys == KeyTiles::kWide) return launch_keys<kD, KeyTiles::kWide>(args, stream);
    }
    if (keys == KeyTiles::kLong) return launch_keys<kD, KeyTiles::kLong>(args, stream);
  }
  return launch_keys<kD, KeyTiles::kShort>(args, stream);
}

// The ladder over kHeadSizes (flash_config.h), the one list the backend also declares: one
// instantiation per compiled head size; the default names what was compiled.
template <std::size_t kIndex = 0>
LaunchStatus launch_head_size(const HopperArgs& args, cudaStream_t stream) {
  if constexpr (kIndex == kHeadSizes.size()) {
    return fail(LaunchStatus::kUnsupported, "FLASH_ATTN: head size " + std::to_string(args.params.head_size) +
                                                " is not compiled; compiled: " + supported_head_sizes_text() +
                                                "; select TORCH_SDPA for other head sizes");
  } else {
    if (args.params.head_size == kHeadSizes[kIndex]) return launch_dtype<kHeadSizes[kIndex]>(args, stream);
    return launch_head_size<kIndex + 1>(args, stream);
  }
}

}  // namespace

LaunchStatus build_compact_keys_cuda(const std::uint8_t* mask, int batch, int seqlen_k, int heads_kv, int head_size,
                                     int block_n, const void* k, const void* v, std::int32_t* block_rows,
                                     std::int32_t* count, void* kg, void* vg, int sm_count, void* stream_ptr) {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (batch <= 0 || batch > 65535 || seqlen_k <= 0 ||
      hopper_detail::compact_mask_words(seqlen_k) > hopper_detail::kCompactMaxWords || head_size % 8 != 0 ||
      sm_count <= 0)
    return fail(LaunchStatus::kInvalidInput, "compact keys: batch 1..65535, 1..393215 keys, head size a multiple of 8");
  const std::int64_t row = std::int64_t{heads_kv} * head_size;
  const std::int64_t stride[3] = {seqlen_k * row, row, head_size};  // contiguous [B, Skv, Hkv, D]
  const auto build = [&](auto tile) {
    hopper_detail::launch_compact_keys<decltype(tile)::value>(mask, seqlen_k, 1, batch, seqlen_k, k, stride, v, stride,
                                                              heads_kv, head_size, block_rows, count, kg, vg, sm_count,
                                                              stream);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return fail(LaunchStatus::kCudaError, std::string("compact keys: ") + cudaGetErrorString(e));
    return LaunchStatus{};
  };
  switch (block_n) {
    case 80: return build(std::integral_constant<int, 80>{});
    case 96: return build(std::integral_constant<int, 96>{});
    case 128: return build(std::integral_constant<int, 128>{});
    case 176: return build(std::integral_constant<int, 176>{});
    default: return fail(LaunchStatus::kInvalidInput, "compact keys: block_n is 80, 96, 128 or 176");
  }
}

LaunchStatus launch_flash_hopper(const HopperArgs& args, void* stream_ptr) {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (args.sm_count <= 0) return fail(LaunchStatus::kInvalidInput, "FLASH_ATTN: sm_count must be positive");
  // The epilogue stores two elements (4 bytes) at a time.
  if (reinterpret_cast<std::uintptr_t>(args.params.out) % 4 != 0 || args.params.out_stride_s % 2 != 0 ||
      args.params.out_stride_h % 2 != 0 || args.params.out_stride_b % 2 != 0)
    return fail(LaunchStatus::kInvalidInput,
                "FLASH_ATTN: out must be 4-byte aligned with even batch/sequence/head strides; pass a contiguous "
                "output tensor");
  return launch_head_size(args, stream);
}

}  // namespace diffattn::flash
