#pragma once
// The arithmetic of FASTVIDEO_VSA's 4x4x4 cube tiling (vsa_cubes.h says why tokens are reordered):
// a token's slot in padded cube order, the token a slot holds, and each cube's valid tokens.
// Host and device code share these: the CPU builds its tables from them, the CUDA kernels evaluate
// them in place, which keeps their launches free of host copies (and so capturable in CUDA graphs).

#include <cstdint>

#include "kernels/sparse/host_device.h"

namespace diffattn {

inline constexpr std::int64_t kVsaCubeEdge = 4;    // tokens per cube along frames, height and width
inline constexpr std::int64_t kVsaCubeTokens = 64;  // kVsaCubeEdge cubed: the block-sparse tile

DIFFATTN_HOST_DEVICE constexpr std::int64_t vsa_cubes_along(std::int64_t extent) {
  return (extent + kVsaCubeEdge - 1) / kVsaCubeEdge;
}

// Tokens of cube `index` along an axis of `extent` tokens: 4, or the remainder at the far edge.
DIFFATTN_HOST_DEVICE constexpr std::int64_t vsa_cube_extent(std::int64_t index, std::int64_t extent) {
  const std::int64_t rest = extent - index * kVsaCubeEdge;
  return rest < kVsaCubeEdge ? rest : kVsaCubeEdge;
}

// A latent video of frames x height x width tokens in raster order, cubes in row-major (cube frame,
// cube row, cube column) order; cube c holds slots [c * 64, c * 64 + valid(c)), its tokens in
// (frame, row, column) order, and padding after them.
struct VsaCubeMap {
  std::int64_t frames = 0, height = 0, width = 0;

  DIFFATTN_HOST_DEVICE constexpr std::int64_t grid_t() const { return vsa_cubes_along(frames); }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t grid_h() const { return vsa_cubes_along(height); }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t grid_w() const { return vsa_cubes_along(width); }
  DIFFATTN_HOST_DEVICE constexpr std::int64_t cubes() const { return grid_t() * grid_h() * grid_w(); }
  // Whether some cube at a far edge holds fewer than 64 tokens.
  DIFFATTN_HOST_DEVICE constexpr bool has_partial_cubes() const {
    return frames % kVsaCubeEdge != 0 || height % kVsaCubeEdge != 0 || width % kVsaCubeEdge != 0;
  }

  DIFFATTN_HOST_DEVICE constexpr std::int32_t valid(std::int64_t cube) const {
    const std::int64_t cx = cube % grid_w(), cy = cube / grid_w() % grid_h(), ct = cube / (grid_w() * grid_h());
    return static_cast<std::int32_t>(vsa_cube_extent(ct, frames) * vsa_cube_extent(cy, height) *
                                     vsa_cube_extent(cx, width));
  }

  DIFFATTN_HOST_DEVICE constexpr std::int64_t slot_of(std::int64_t token) const {
    const std::int64_t x = token % width, y = token / width % height, t = token / (width * height);
    const std::int64_t cx = x / kVsaCubeEdge, cy = y / kVsaCubeEdge, ct = t / kVsaCubeEdge;
    const std::int64_t cube = (ct * grid_h() + cy) * grid_w() + cx;
    const std::int64_t eh = vsa_cube_extent(cy, height), ew = vsa_cube_extent(cx, width);
    const std::int64_t position = ((t % kVsaCubeEdge) * eh + y % kVsaCubeEdge) * ew + x % kVsaCubeEdge;
    return cube * kVsaCubeTokens + position;
  }

  // The token whose slot is `slot`, or -1 for a padding slot.
  DIFFATTN_HOST_DEVICE constexpr std::int64_t token_at(std::int64_t slot) const {
    const std::int64_t cube = slot / kVsaCubeTokens, position = slot % kVsaCubeTokens;
    const std::int64_t cx = cube % grid_w(), cy = cube / grid_w() % grid_h(), ct = cube / (grid_w() * grid_h());
    const std::int64_t eh = vsa_cube_extent(cy, height), ew = vsa_cube_extent(cx, width);
    if (position >= vsa_cube_extent(ct, frames) * eh * ew) return -1;
    const std::int64_t t = ct * kVsaCubeEdge + position / (eh * ew);
    const std::int64_t y = cy * kVsaCubeEdge + position / ew % eh;
    const std::int64_t x = cx * kVsaCubeEdge + position % ew;
    return (t * height + y) * width + x;
  }
};

}  // namespace diffattn
