#pragma once
// The key-block lists a dense keep-mask [B|1, H|1, Sq, Skv] gives a tiled attention kernel: per
// query tile of q_tile rows, the ascending key blocks of k_tile keys that keep at least one key
// for some row of the tile, each marked partial when it also drops one. The CPU oracle of the
// device builder (kernels/cuda/flash/dense_mask.h), whose lists must equal these.

#include <cstdint>
#include <vector>

#include "diffattn/tensor.h"

namespace diffattn {

struct DenseMaskBlockLists {
  std::int64_t batch = 1, heads = 1;  // the mask's: 1 for a broadcast dimension
  std::int64_t q_tiles = 0, k_blocks = 0;
  // List r = (b * heads + h) * q_tiles + t is indices[offsets[r] .. offsets[r + 1]).
  std::vector<std::int32_t> offsets, indices;
  std::vector<std::uint8_t> partial;  // per index: the block drops a key of some row of the tile
};

// `mask`: a CPU bool view [B|1, H|1, Sq, Skv].
DenseMaskBlockLists dense_mask_block_lists(const TensorView& mask, int q_tile, int k_tile);

}  // namespace diffattn
