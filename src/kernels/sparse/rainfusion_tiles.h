#pragma once
// RAINFUSION_ATTN's tiling of a call's sequence, plain functions shared by its CPU and GPU paths
// and testable alone.
//
// Every frame of the latent video is cut into patches of up to kRainTileTokens tokens
// (kRainPatchRows x kRainPatchCols; a frame under that on one side gets patches as long as a tile
// allows on the other), partial at the far edges, and each patch is one tile; the video's tiles
// come first, in (frame, patch row, patch column) order, then the text tokens (text_before, then
// text_after) in tiles of kRainTileTokens, the last partial. Tiles never straddle two frames, so
// "the same frame" (spatial heads), "the same place in other frames" (temporal heads) and "the
// first frame" (the sink) are whole sets of tiles. Tokens are copied into this padded order, as
// FASTVIDEO_VSA's cubes are (kernels/sparse/vsa_cubes.h says why); the layout's tile rows keep the
// padding slots out of the arithmetic. RainTileMap (rainfusion_tile_map.h) is the arithmetic; these
// are its tables, which the CPU path reads.

#include <cstdint>
#include <vector>

#include "diffattn/problem.h"
#include "kernels/sparse/rainfusion_tile_map.h"

namespace diffattn {

struct RainTiles {
  std::int64_t frames = 0;
  std::int64_t patch_h = 0, patch_w = 0;      // tokens per patch along height and width (whole patches)
  std::int64_t patches_h = 0, patches_w = 0;  // patches per frame along height and width
  std::int64_t video_tiles = 0, text_tiles = 0;
  std::vector<std::int32_t> valid;  // valid tokens of each tile (all but at the edges and in the last text tile)
  std::vector<std::int64_t> slot;   // each token's slot, in sequence order: tile * kRainTileTokens + position

  std::int64_t patches_per_frame() const { return patches_h * patches_w; }
  std::int64_t count() const { return video_tiles + text_tiles; }
  std::int64_t padded_length() const { return count() * kRainTileTokens; }
  // Position of video tile `t` (t < video_tiles).
  std::int64_t frame_of(std::int64_t t) const { return t / patches_per_frame(); }
  std::int64_t patch_row_of(std::int64_t t) const { return t % patches_per_frame() / patches_w; }
  std::int64_t patch_col_of(std::int64_t t) const { return t % patches_w; }
};

// `g` has positive extents and non-negative text counts.
RainTiles tile_sequence_for_rainfusion(const VideoGeometry& g);

RainTileMap rain_tile_map(const VideoGeometry& g);

}  // namespace diffattn
