#include "kernels/sparse/rainfusion_tiles.h"

namespace diffattn {

RainTileMap rain_tile_map(const VideoGeometry& g) {
  return RainTileMap::of(g.frames, g.height, g.width, g.text_before, g.text_after);
}

RainTiles tile_sequence_for_rainfusion(const VideoGeometry& g) {
  const RainTileMap map = rain_tile_map(g);
  RainTiles tiles;
  tiles.frames = g.frames;
  tiles.patch_h = map.patch_h, tiles.patch_w = map.patch_w;
  tiles.patches_h = map.patches_h, tiles.patches_w = map.patches_w;
  tiles.video_tiles = map.video_tiles();
  tiles.text_tiles = map.text_tiles();
  tiles.valid.resize(static_cast<std::size_t>(tiles.count()));
  for (std::int64_t t = 0; t < tiles.count(); ++t) tiles.valid[static_cast<std::size_t>(t)] = map.valid(t);
  tiles.slot.resize(static_cast<std::size_t>(g.sequence_length()));
  for (std::int64_t token = 0; token < g.sequence_length(); ++token)
    tiles.slot[static_cast<std::size_t>(token)] = map.slot_of(token);
  return tiles;
}

}  // namespace diffattn
