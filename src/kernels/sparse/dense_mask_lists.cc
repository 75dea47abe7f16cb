#include "kernels/sparse/dense_mask_lists.h"

#include <algorithm>

namespace diffattn {

DenseMaskBlockLists dense_mask_block_lists(const TensorView& mask, int q_tile, int k_tile) {
  DenseMaskBlockLists l;
  l.batch = mask.size(0);
  l.heads = mask.size(1);
  const std::int64_t sq = mask.size(2), skv = mask.size(3);
  l.q_tiles = (sq + q_tile - 1) / q_tile;
  l.k_blocks = (skv + k_tile - 1) / k_tile;
  const auto* data = static_cast<const std::uint8_t*>(mask.data);
  l.offsets.push_back(0);
  for (std::int64_t b = 0; b < l.batch; ++b)
    for (std::int64_t h = 0; h < l.heads; ++h)
      for (std::int64_t t = 0; t < l.q_tiles; ++t) {
        for (std::int64_t nb = 0; nb < l.k_blocks; ++nb) {
          bool any = false, all = true;
          for (std::int64_t i = t * q_tile; i < std::min(sq, (t + 1) * q_tile); ++i)
            for (std::int64_t j = nb * k_tile; j < std::min(skv, (nb + 1) * k_tile); ++j) {
              const bool keep = data[b * mask.stride(0) + h * mask.stride(1) + i * mask.stride(2) +
                                     j * mask.stride(3)] != 0;
              any = any || keep;
              all = all && keep;
            }
          if (!any) continue;
          l.indices.push_back(static_cast<std::int32_t>(nb));
          l.partial.push_back(all ? 0 : 1);
        }
        l.offsets.push_back(static_cast<std::int32_t>(l.indices.size()));
      }
  return l;
}

}  // namespace diffattn
