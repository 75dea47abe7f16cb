#pragma once
// The shape of RAINFUSION_ATTN's block lists, fixed by the tiling and the tile budget alone (never
// by the data): every video query tile lists `listed` video key tiles, then every text tile; every
// text query tile lists every tile. Host and device code share it, so the CUDA path lays out its
// lists on the GPU exactly as the CPU plan (rainfusion_plan.h) does.

#include <cstdint>

#include "kernels/sparse/host_device.h"

namespace diffattn {

struct RainListShape {
  std::int64_t video_tiles = 0, text_tiles = 0;
  std::int64_t sink = 0;    // the first frame's video tiles, kept in every video row
  std::int64_t keep = 0;    // the budget of video key tiles per video query tile
  std::int64_t listed = 0;  // video key tiles each video query tile lists: the budget, or the sink if larger

  DIFFATTN_HOST_DEVICE static constexpr RainListShape of(std::int64_t video_tiles, std::int64_t text_tiles,
                                                         std::int64_t patches_per_frame, std::int64_t keep) {
    RainListShape s;
    s.video_tiles = video_tiles, s.text_tiles = text_tiles, s.keep = keep;
    s.sink = patches_per_frame < video_tiles ? patches_per_frame : video_tiles;
    const std::int64_t budget = keep < video_tiles ? keep : video_tiles;
    s.listed = s.sink > budget ? s.sink : budget;
    return s;
  }

  DIFFATTN_HOST_DEVICE constexpr std::int64_t tiles() const { return video_tiles + text_tiles; }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t video_row() const { return listed + text_tiles; }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t per_head() const {
    return video_tiles * video_row() + text_tiles * tiles();
  }
  // Where row r (= (b * Hq + h) * tiles + query tile) starts; r = heads x tiles gives the total.
  DIFFATTN_HOST_DEVICE constexpr std::int64_t offset(std::int64_t r) const {
    const std::int64_t head = r / tiles(), t = r % tiles();
    const std::int64_t in_head =
        t < video_tiles ? t * video_row() : video_tiles * video_row() + (t - video_tiles) * tiles();
    return head * per_head() + in_head;
  }
};

}  // namespace diffattn
