#include "kernels/sparse/rainfusion_tiles.h"

#include <algorithm>

namespace diffattn {

RainTiles tile_sequence_for_rainfusion(const VideoGeometry& g) {
  RainTiles tiles;
  tiles.frames = g.frames;
  // A frame under a patch's extent on one side gets patches as long as a tile allows on the other.
  if (g.height < kRainPatchRows) {
    tiles.patch_h = g.height;
    tiles.patch_w = std::min(g.width, kRainTileTokens / g.height);
  } else if (g.width < kRainPatchCols) {
    tiles.patch_w = g.width;
    tiles.patch_h = std::min(g.height, kRainTileTokens / g.width);
  } else {
    tiles.patch_h = kRainPatchRows;
    tiles.patch_w = kRainPatchCols;
  }
  tiles.patches_h = (g.height + tiles.patch_h - 1) / tiles.patch_h;
  tiles.patches_w = (g.width + tiles.patch_w - 1) / tiles.patch_w;
  tiles.video_tiles = g.frames * tiles.patches_per_frame();
  const std::int64_t text = g.text_before + g.text_after;
  tiles.text_tiles = (text + kRainTileTokens - 1) / kRainTileTokens;

  tiles.valid.assign(static_cast<std::size_t>(tiles.count()), 0);
  tiles.slot.resize(static_cast<std::size_t>(g.sequence_length()));
  auto place_text = [&](std::int64_t token, std::int64_t text_index) {
    const std::int64_t tile = tiles.video_tiles + text_index / kRainTileTokens;
    tiles.slot[static_cast<std::size_t>(token)] = tile * kRainTileTokens + text_index % kRainTileTokens;
    ++tiles.valid[static_cast<std::size_t>(tile)];
  };
  for (std::int64_t i = 0; i < g.text_before; ++i) place_text(i, i);
  for (std::int64_t f = 0; f < g.frames; ++f)
    for (std::int64_t y = 0; y < g.height; ++y)
      for (std::int64_t x = 0; x < g.width; ++x) {
        const std::int64_t py = y / tiles.patch_h, px = x / tiles.patch_w;
        const std::int64_t tile = (f * tiles.patches_h + py) * tiles.patches_w + px;
        // The patch's width decides where a row of it starts: the far column of patches may be narrower.
        const std::int64_t width = std::min(tiles.patch_w, g.width - px * tiles.patch_w);
        const std::int64_t position = (y - py * tiles.patch_h) * width + (x - px * tiles.patch_w);
        const std::int64_t token = g.text_before + (f * g.height + y) * g.width + x;
        tiles.slot[static_cast<std::size_t>(token)] = tile * kRainTileTokens + position;
        ++tiles.valid[static_cast<std::size_t>(tile)];
      }
  const std::int64_t after = g.text_before + g.tokens();
  for (std::int64_t i = 0; i < g.text_after; ++i) place_text(after + i, g.text_before + i);
  return tiles;
}

}  // namespace diffattn
