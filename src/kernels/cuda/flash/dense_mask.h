#pragma once
// Dense keep-masks [B|1, H|1, Sq, Skv] for the listed walk of the Hopper flash kernel: the mask as
// bits per query row, and per query tile the ascending key blocks that keep at least one key, each
// flagged when it also drops one (FlashParams::row_bits, bs_offsets / bs_indices / bs_partial).
// Blocks a mask empties are never loaded or computed; blocks it keeps whole are not masked.
// Built on the device on the call's stream; kernels/sparse/dense_mask_lists.h is the CPU oracle.

#include <cstdint>
#include <string>

namespace diffattn::flash {

struct DenseMaskView {
  const std::uint8_t* data = nullptr;  // bool keep-mask on the device
  std::int64_t batch = 1, heads = 1;   // 1 for a broadcast dimension
  std::int64_t stride_b = 0, stride_h = 0, stride_i = 0, stride_j = 0;  // elements
  int seqlen_q = 0, seqlen_k = 0;
};

struct DenseMaskLists {
  void* workspace = nullptr;  // one allocation holding everything below; free with cudaFreeAsync
  const std::uint32_t* row_bits = nullptr;
  int words = 0;  // per query row: whole key blocks
  std::int64_t row_bits_stride_b = 0, row_bits_stride_h = 0;  // words; 0 for a broadcast dimension
  const std::int32_t* offsets = nullptr;
  const std::int32_t* indices = nullptr;
  const std::uint8_t* partial = nullptr;
  int q_tiles = 0, k_blocks = 0;
  int list_stride_b = 0, list_stride_h = 0;  // in lists; 0 for a broadcast dimension
};

struct DenseMaskStatus {
  bool ok = true;
  std::string message;
};

// How many CTAs share each query tile's rows in the packing pass (dense_mask.cu): one where there
// are enough tiles; else enough that tiles x splits reach kMaskPackMinCtas (four 256-thread CTAs an
// SM of a 132-SM GPU: a mask broadcast over heads has few tiles, and one CTA a tile left most SMs
// idle), with at least 8 rows to each.
inline constexpr std::int64_t kMaskPackMinCtas = 4 * 132;
constexpr int mask_row_splits(std::int64_t tiles, int q_tile) {
  const std::int64_t want = (kMaskPackMinCtas + tiles - 1) / tiles, most = q_tile / 8 > 1 ? q_tile / 8 : 1;
  return static_cast<int>(want < 1 ? 1 : want > most ? most : want);
}

// Queues the mask's packing and list building on `stream` (a cudaStream_t) for tiles of q_tile
// query rows and k_tile keys (k_tile a multiple of 32). On success *out holds device pointers valid
// in stream order until out->workspace is freed.
DenseMaskStatus build_dense_mask_lists(const DenseMaskView& mask, int q_tile, int k_tile, void* stream,
                                       DenseMaskLists* out);

}  // namespace diffattn::flash
