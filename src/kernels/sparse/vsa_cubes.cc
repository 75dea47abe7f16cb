#include "kernels/sparse/vsa_cubes.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace diffattn {
namespace {

std::string geometry_text(const VideoGeometry& g) {
  return std::to_string(g.frames) + " x " + std::to_string(g.height) + " x " + std::to_string(g.width);
}

}  // namespace

bool VsaCubes::has_partial_cubes() const {
  return std::any_of(valid.begin(), valid.end(), [](std::int32_t n) { return n != kVsaCubeTokens; });
}

VsaCubes tile_video_into_cubes(const VideoGeometry& g) {
  const VsaCubeMap map{g.frames, g.height, g.width};
  VsaCubes cubes;
  cubes.grid_t = map.grid_t();
  cubes.grid_h = map.grid_h();
  cubes.grid_w = map.grid_w();
  cubes.valid.resize(static_cast<std::size_t>(cubes.count()));
  cubes.slot.resize(static_cast<std::size_t>(g.tokens()));
  for (std::int64_t token = 0; token < g.tokens(); ++token)
    cubes.slot[static_cast<std::size_t>(token)] = map.slot_of(token);
  for (std::int64_t c = 0; c < cubes.count(); ++c) cubes.valid[static_cast<std::size_t>(c)] = map.valid(c);
  return cubes;
}

std::int64_t vsa_topk_for_sparsity(double sparsity, std::int64_t cubes) {
  const auto keep = static_cast<std::int64_t>(std::ceil((1.0 - sparsity) * static_cast<double>(cubes)));
  return std::max<std::int64_t>(1, std::min(keep, cubes));
}

Status check_vsa_topk(std::int64_t topk, const VideoGeometry& g) {
  const std::int64_t cubes = VsaCubeMap{g.frames, g.height, g.width}.cubes();
  if (topk >= 1 && topk <= cubes) return Status::Ok();
  return InvalidInput("fastvideo_vsa_topk = " + std::to_string(topk) + " cannot be given by the video geometry " +
                      geometry_text(g) + ", which has " + std::to_string(cubes) +
                      " cubes of 4x4x4 tokens; choose a topk in 1.." + std::to_string(cubes) +
                      " (about (1 - sparsity) x " + std::to_string(cubes) + ", e.g. " +
                      std::to_string(vsa_topk_for_sparsity(0.875, cubes)) + " for 87.5 % sparsity)");
}

Status check_vsa_problem(const AttentionProblem& p, std::int64_t topk) {
  if (!p.video)
    return InvalidInput("FASTVIDEO_VSA needs the call's video geometry; pass AttentionProblem::video (frames x "
                        "height x width of the latent)");
  if (p.mask || p.is_varlen() || p.causal || p.lse)
    return Unsupported("FASTVIDEO_VSA takes no mask, cu_seqlens, causal flag or lse; select TORCH_SDPA for those");
  if (p.video->text_before != 0 || p.video->text_after != 0)
    return Unsupported("FASTVIDEO_VSA tiles video tokens only, but the call's geometry has " +
                       std::to_string(p.video->text_before + p.video->text_after) +
                       " text tokens; run the video tokens alone, or select RAINFUSION_ATTN (which keeps text dense) "
                       "or TORCH_SDPA");
  return check_vsa_topk(topk, *p.video);
}

}  // namespace diffattn
