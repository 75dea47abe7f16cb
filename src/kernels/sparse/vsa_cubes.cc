#include "kernels/sparse/vsa_cubes.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace diffattn {
namespace {

std::int64_t cubes_along(std::int64_t extent) { return (extent + kVsaCubeEdge - 1) / kVsaCubeEdge; }

// Tokens of cube `index` along an axis of `extent` tokens: 4, or the remainder at the far edge.
std::int64_t cube_extent(std::int64_t index, std::int64_t extent) {
  return std::min(kVsaCubeEdge, extent - index * kVsaCubeEdge);
}

std::string geometry_text(const VideoGeometry& g) {
  return std::to_string(g.frames) + " x " + std::to_string(g.height) + " x " + std::to_string(g.width);
}

}  // namespace

bool VsaCubes::has_partial_cubes() const {
  return std::any_of(valid.begin(), valid.end(), [](std::int32_t n) { return n != kVsaCubeTokens; });
}

VsaCubes tile_video_into_cubes(const VideoGeometry& g) {
  VsaCubes cubes;
  cubes.grid_t = cubes_along(g.frames);
  cubes.grid_h = cubes_along(g.height);
  cubes.grid_w = cubes_along(g.width);
  cubes.valid.resize(static_cast<std::size_t>(cubes.count()));
  cubes.slot.resize(static_cast<std::size_t>(g.tokens()));
  for (std::int64_t t = 0; t < g.frames; ++t)
    for (std::int64_t y = 0; y < g.height; ++y)
      for (std::int64_t x = 0; x < g.width; ++x) {
        const std::int64_t ct = t / kVsaCubeEdge, cy = y / kVsaCubeEdge, cx = x / kVsaCubeEdge;
        const std::int64_t cube = (ct * cubes.grid_h + cy) * cubes.grid_w + cx;
        const std::int64_t eh = cube_extent(cy, g.height), ew = cube_extent(cx, g.width);
        const std::int64_t position = ((t % kVsaCubeEdge) * eh + y % kVsaCubeEdge) * ew + x % kVsaCubeEdge;
        cubes.slot[static_cast<std::size_t>((t * g.height + y) * g.width + x)] = cube * kVsaCubeTokens + position;
      }
  for (std::int64_t ct = 0; ct < cubes.grid_t; ++ct)
    for (std::int64_t cy = 0; cy < cubes.grid_h; ++cy)
      for (std::int64_t cx = 0; cx < cubes.grid_w; ++cx)
        cubes.valid[static_cast<std::size_t>((ct * cubes.grid_h + cy) * cubes.grid_w + cx)] = static_cast<std::int32_t>(
            cube_extent(ct, g.frames) * cube_extent(cy, g.height) * cube_extent(cx, g.width));
  return cubes;
}

std::int64_t vsa_topk_for_sparsity(double sparsity, std::int64_t cubes) {
  const auto keep = static_cast<std::int64_t>(std::ceil((1.0 - sparsity) * static_cast<double>(cubes)));
  return std::max<std::int64_t>(1, std::min(keep, cubes));
}

Status check_vsa_topk(std::int64_t topk, const VideoGeometry& g) {
  const std::int64_t cubes = cubes_along(g.frames) * cubes_along(g.height) * cubes_along(g.width);
  if (topk >= 1 && topk <= cubes) return Status::Ok();
  return InvalidInput("fastvideo_vsa_topk = " + std::to_string(topk) + " cannot be given by the video geometry " +
                      geometry_text(g) + ", which has " + std::to_string(cubes) +
                      " cubes of 4x4x4 tokens; choose a topk in 1.." + std::to_string(cubes) +
                      " (about (1 - sparsity) x " + std::to_string(cubes) + ", e.g. " +
                      std::to_string(vsa_topk_for_sparsity(0.875, cubes)) + " for 87.5 % sparsity)");
}

}  // namespace diffattn
