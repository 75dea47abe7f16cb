#pragma once
// The arithmetic of RAINFUSION_ATTN's tiling (rainfusion_tiles.h says what the tiles are): each
// tile's valid tokens, a token's slot in padded tile order and the token a slot holds. Host and
// device code share it: the CPU builds its tables from it, the CUDA kernels evaluate it in place,
// which keeps their launches free of host copies (and so capturable in CUDA graphs).

#include <cstdint>

#include "kernels/sparse/host_device.h"

namespace diffattn {

// 128 tokens, patches of 8 rows x 16 columns where that cuts a frame into as few tiles as any shape
// does: the CUDA fine pass runs the block-sparse Hopper kernel's 128 x 128 tiling (near dense
// FLASH_ATTN's rate, twice its 64 x 64 tiling's; docs/backends/sparse.md).
inline constexpr std::int64_t kRainTileTokens = 128;
inline constexpr std::int64_t kRainPatchRows = 8;
inline constexpr std::int64_t kRainPatchCols = kRainTileTokens / kRainPatchRows;

// A sequence of text_before text tokens, a latent video of frames x height x width tokens in raster
// order, and text_after text tokens. Video tiles come first, in (frame, patch row, patch column)
// order, each patch's tokens row by row; then the text (text_before, then text_after) in tiles of
// kRainTileTokens, the last partial; padding fills every tile to kRainTileTokens slots.
struct RainTileMap {
  std::int64_t frames = 0, height = 0, width = 0, text_before = 0, text_after = 0;
  std::int64_t patch_h = 0, patch_w = 0;      // tokens per whole patch along height and width
  std::int64_t patches_h = 0, patches_w = 0;  // patches per frame along height and width

  // The map of a sequence with positive video extents and non-negative text counts. A frame under
  // a patch's extent on one side gets patches as long as a tile allows on the other; any other
  // frame gets the patch shape that cuts it into the fewest tiles (rain_patch_shape).
  DIFFATTN_HOST_DEVICE static constexpr RainTileMap of(std::int64_t frames, std::int64_t height, std::int64_t width,
                                                       std::int64_t text_before, std::int64_t text_after) {
    RainTileMap m;
    m.frames = frames, m.height = height, m.width = width, m.text_before = text_before, m.text_after = text_after;
    if (height < kRainPatchRows) {
      m.patch_h = height;
      m.patch_w = width < kRainTileTokens / height ? width : kRainTileTokens / height;
    } else if (width < kRainPatchCols) {
      m.patch_w = width;
      m.patch_h = height < kRainTileTokens / width ? height : kRainTileTokens / width;
    } else {
      choose_patch_shape(height, width, m.patch_h, m.patch_w);
    }
    m.patches_h = (height + m.patch_h - 1) / m.patch_h;
    m.patches_w = (width + m.patch_w - 1) / m.patch_w;
    return m;
  }

  DIFFATTN_HOST_DEVICE constexpr std::int64_t patches_per_frame() const { return patches_h * patches_w; }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t video_tokens() const { return frames * height * width; }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t text_tokens() const { return text_before + text_after; }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t video_tiles() const { return frames * patches_per_frame(); }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t text_tiles() const {
    return (text_tokens() + kRainTileTokens - 1) / kRainTileTokens;
  }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t tiles() const { return video_tiles() + text_tiles(); }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t padded_length() const { return tiles() * kRainTileTokens; }

  // The valid tokens of video patch (row py, column px): the far patches may be shorter.
  DIFFATTN_HOST_DEVICE constexpr std::int64_t patch_rows(std::int64_t py) const {
    const std::int64_t rest = height - py * patch_h;
    return rest < patch_h ? rest : patch_h;
  }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t patch_cols(std::int64_t px) const {
    const std::int64_t rest = width - px * patch_w;
    return rest < patch_w ? rest : patch_w;
  }

  DIFFATTN_HOST_DEVICE constexpr std::int32_t valid(std::int64_t tile) const {
    if (tile < video_tiles()) {
      const std::int64_t in_frame = tile % patches_per_frame();
      return static_cast<std::int32_t>(patch_rows(in_frame / patches_w) * patch_cols(in_frame % patches_w));
    }
    const std::int64_t rest = text_tokens() - (tile - video_tiles()) * kRainTileTokens;
    return static_cast<std::int32_t>(rest < kRainTileTokens ? rest : kRainTileTokens);
  }

  DIFFATTN_HOST_DEVICE constexpr std::int64_t slot_of(std::int64_t token) const {
    if (token < text_before) return text_slot(token);
    const std::int64_t v = token - text_before;
    if (v >= video_tokens()) return text_slot(text_before + v - video_tokens());
    const std::int64_t x = v % width, y = v / width % height, f = v / (width * height);
    const std::int64_t py = y / patch_h, px = x / patch_w;
    const std::int64_t tile = (f * patches_h + py) * patches_w + px;
    return tile * kRainTileTokens + (y - py * patch_h) * patch_cols(px) + (x - px * patch_w);
  }

  // The token whose slot is `slot`, or -1 for a padding slot.
  DIFFATTN_HOST_DEVICE constexpr std::int64_t token_at(std::int64_t slot) const {
    const std::int64_t tile = slot / kRainTileTokens, position = slot % kRainTileTokens;
    if (tile >= video_tiles()) {
      const std::int64_t text = (tile - video_tiles()) * kRainTileTokens + position;
      if (text >= text_tokens()) return -1;
      return text < text_before ? text : text + video_tokens();
    }
    const std::int64_t f = tile / patches_per_frame(), in_frame = tile % patches_per_frame();
    const std::int64_t py = in_frame / patches_w, px = in_frame % patches_w, cols = patch_cols(px);
    if (position >= patch_rows(py) * cols) return -1;
    const std::int64_t y = py * patch_h + position / cols, x = px * patch_w + position % cols;
    return text_before + (f * height + y) * width + x;
  }

  // The sampled video query s of `samples` (samples <= video tokens): evenly spread over the video.
  DIFFATTN_HOST_DEVICE constexpr std::int64_t sampled_token(std::int64_t s, std::int64_t samples) const {
    return text_before + (2 * s + 1) * video_tokens() / (2 * samples);
  }

  // The patch shape of a frame at least kRainPatchRows x kRainPatchCols tokens: of the shapes of at
  // most kRainTileTokens tokens, 4 to 32 rows high and at most 4 times longer one way than the
  // other, the one that cuts the frame into the fewest patches, since every patch is a padded tile
  // that the fine pass computes whole (a 30 x 52 frame: 14 patches of 15 x 8 instead of 16 of
  // 8 x 16); among equals the one nearest 8 x 16 (|rows - 8| + |columns - 16|), then the lower.
  DIFFATTN_HOST_DEVICE static constexpr void choose_patch_shape(std::int64_t height, std::int64_t width,
                                                                std::int64_t& patch_h, std::int64_t& patch_w) {
    std::int64_t best_count = -1, best_distance = 0;
    for (std::int64_t rows = 4; rows <= 32 && rows <= height; ++rows) {
      const std::int64_t cols = width < kRainTileTokens / rows ? width : kRainTileTokens / rows;
      if (cols < 4 || rows > 4 * cols || cols > 4 * rows) continue;
      const std::int64_t count = ((height + rows - 1) / rows) * ((width + cols - 1) / cols);
      const std::int64_t distance = (rows > kRainPatchRows ? rows - kRainPatchRows : kRainPatchRows - rows) +
                                    (cols > kRainPatchCols ? cols - kRainPatchCols : kRainPatchCols - cols);
      if (best_count < 0 || count < best_count || (count == best_count && distance < best_distance)) {
        best_count = count, best_distance = distance;
        patch_h = rows, patch_w = cols;
      }
    }
  }

 private:
  DIFFATTN_HOST_DEVICE constexpr std::int64_t text_slot(std::int64_t text) const {
    return (video_tiles() + text / kRainTileTokens) * kRainTileTokens + text % kRainTileTokens;
  }
};

}  // namespace diffattn
