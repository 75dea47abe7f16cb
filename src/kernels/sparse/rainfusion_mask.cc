#include "kernels/sparse/rainfusion_mask.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

namespace diffattn {
namespace {

std::int64_t pattern_distance(const RainTiles& t, RainPattern pattern, std::int64_t query, std::int64_t key) {
  switch (pattern) {
    case RainPattern::kSpatial: return std::abs(t.frame_of(query) - t.frame_of(key));
    case RainPattern::kTemporal:
      return std::max(std::abs(t.patch_row_of(query) - t.patch_row_of(key)),
                      std::abs(t.patch_col_of(query) - t.patch_col_of(key)));
    case RainPattern::kTextural: return 0;
  }
  return 0;
}

}  // namespace

std::string_view rain_pattern_name(RainPattern pattern) {
  switch (pattern) {
    case RainPattern::kSpatial: return "spatial";
    case RainPattern::kTemporal: return "temporal";
    case RainPattern::kTextural: return "textural";
  }
  return "?";
}

std::int64_t rain_keep_tiles(double sparsity, std::int64_t video_tiles) {
  const auto keep = static_cast<std::int64_t>(std::llround((1.0 - sparsity) * static_cast<double>(video_tiles)));
  return std::clamp<std::int64_t>(keep, 1, video_tiles);
}

void rain_select_tiles(const RainTiles& tiles, RainPattern pattern, std::int64_t query, const double* scores,
                       std::int64_t keep, std::vector<std::int32_t>& scratch, std::vector<std::int32_t>& out) {
  const std::int64_t sink = std::min(tiles.patches_per_frame(), tiles.video_tiles);
  out.resize(static_cast<std::size_t>(sink));
  std::iota(out.begin(), out.end(), 0);
  const std::int64_t more = std::min(keep, tiles.video_tiles) - sink;
  if (more <= 0) return;
  scratch.resize(static_cast<std::size_t>(tiles.video_tiles - sink));
  std::iota(scratch.begin(), scratch.end(), static_cast<std::int32_t>(sink));
  auto first = [&](std::int32_t a, std::int32_t b) {
    const std::int64_t da = pattern_distance(tiles, pattern, query, a), db = pattern_distance(tiles, pattern, query, b);
    if (da != db) return da < db;
    if (scores[a] != scores[b]) return scores[a] > scores[b];
    return a < b;
  };
  std::nth_element(scratch.begin(), scratch.begin() + (more - 1), scratch.end(), first);
  out.insert(out.end(), scratch.begin(), scratch.begin() + more);
  std::sort(out.begin() + sink, out.end());
}

}  // namespace diffattn
