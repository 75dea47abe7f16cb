#include "kernels/sparse/sparse_density.h"

#include <cstdint>

#include "kernels/sparse/rainfusion_mask.h"
#include "kernels/sparse/rainfusion_tiles.h"
#include "kernels/sparse/vsa_cubes.h"

namespace diffattn {

std::optional<SparseDensity> sparse_video_density(const std::string& backend, const AttentionSpec& spec,
                                                  const VideoGeometry& g) {
  if (g.frames <= 0 || g.height <= 0 || g.width <= 0 || g.text_before < 0 || g.text_after < 0) return std::nullopt;
  if (backend == "FASTVIDEO_VSA") {
    if (g.text_before != 0 || g.text_after != 0) return std::nullopt;
    const std::int64_t cubes = tile_video_into_cubes(g).count();
    const std::int64_t topk = spec.fastvideo_vsa_topk.value_or(cubes);
    if (topk < 1 || topk > cubes) return std::nullopt;
    return SparseDensity{static_cast<double>(topk) / static_cast<double>(cubes),
                         std::to_string(topk) + " of " + std::to_string(cubes) + " key cubes per query cube"};
  }
  if (backend == "RAINFUSION_ATTN") {
    const BlockSparseSpec block = spec.block_sparse.value_or(BlockSparseSpec{});
    const RainTiles tiles = tile_sequence_for_rainfusion(g);
    const std::int64_t video = tiles.video_tiles, count = tiles.count();
    const std::int64_t listed = rain_listed_video_tiles(tiles, rain_keep_tiles(block.sparsity, video));
    const double pairs = static_cast<double>(video) * static_cast<double>(listed + tiles.text_tiles) +
                         static_cast<double>(tiles.text_tiles) * static_cast<double>(count);
    std::string detail = std::to_string(listed) + " of " + std::to_string(video) + " video tiles per video query tile";
    if (tiles.text_tiles > 0) detail += ", " + std::to_string(tiles.text_tiles) + " text tiles dense";
    if (block.start_step > 0 || block.end_step > 0 || !block.skip_layer_indices.empty())
      detail += "; dense on its step window and skipped layers";
    return SparseDensity{pairs / (static_cast<double>(count) * static_cast<double>(count)), detail};
  }
  return std::nullopt;
}

}  // namespace diffattn
