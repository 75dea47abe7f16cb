#include "kernels/sparse/rainfusion_mask.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <utility>

#include "kernels/sparse/rainfusion_list_shape.h"

namespace diffattn {
namespace {

// The candidates are the video key tiles past the sink (frames 1 on). Each collector appends, in
// index order, the candidates nearer than the distance at which `more` of them are reached to
// `nearer` and those at that distance to `at`, and returns how many are nearer. A spatial key's
// distance is its frame's, so whole frames are kept or ranked; a temporal key's is its patch
// position's, the same in every frame.
std::int64_t collect_spatial(const RainTiles& t, std::int64_t query, std::int64_t more,
                             std::vector<std::int32_t>& nearer, std::vector<std::int32_t>& at) {
  const std::int64_t frame = t.frame_of(query), per_frame = t.patches_per_frame();
  const auto frames_at = [&](std::int64_t d) {
    const std::int64_t below = frame - d >= 1 ? 1 : 0, above = d > 0 && frame + d < t.frames ? 1 : 0;
    return below + above;
  };
  std::int64_t boundary = 0, kept = 0;
  while (kept + frames_at(boundary) * per_frame < more) kept += frames_at(boundary++) * per_frame;
  at.clear();
  for (std::int64_t f = 1; f < t.frames; ++f) {
    const std::int64_t distance = std::abs(f - frame);
    if (distance > boundary) continue;
    std::vector<std::int32_t>& into = distance < boundary ? nearer : at;
    const auto first = static_cast<std::int32_t>(f * per_frame);
    for (std::int32_t key = first; key < first + per_frame; ++key) into.push_back(key);
  }
  return kept;
}

std::int64_t collect_temporal(const RainTiles& t, std::int64_t query, std::int64_t more,
                              std::vector<std::int32_t>& nearer, std::vector<std::int32_t>& at) {
  const std::int64_t row = t.patch_row_of(query), col = t.patch_col_of(query), per_frame = t.patches_per_frame();
  thread_local std::vector<std::int64_t> distance_of, positions_per_distance;
  thread_local std::vector<std::int32_t> nearer_positions, boundary_positions;
  distance_of.resize(static_cast<std::size_t>(per_frame));
  positions_per_distance.assign(static_cast<std::size_t>(std::max(t.patches_h, t.patches_w)), 0);
  for (std::int64_t r = 0, p = 0; r < t.patches_h; ++r)
    for (std::int64_t c = 0; c < t.patches_w; ++c, ++p) {
      const std::int64_t distance = std::max(std::abs(r - row), std::abs(c - col));
      distance_of[static_cast<std::size_t>(p)] = distance;
      ++positions_per_distance[static_cast<std::size_t>(distance)];
    }
  std::int64_t boundary = 0, kept = 0;
  while (kept + positions_per_distance[static_cast<std::size_t>(boundary)] * (t.frames - 1) < more)
    kept += positions_per_distance[static_cast<std::size_t>(boundary++)] * (t.frames - 1);
  nearer_positions.clear();
  boundary_positions.clear();
  for (std::int64_t p = 0; p < per_frame; ++p) {
    const std::int64_t distance = distance_of[static_cast<std::size_t>(p)];
    if (distance < boundary) nearer_positions.push_back(static_cast<std::int32_t>(p));
    else if (distance == boundary) boundary_positions.push_back(static_cast<std::int32_t>(p));
  }
  at.clear();
  for (std::int64_t f = 1; f < t.frames; ++f) {
    const auto first = static_cast<std::int32_t>(f * per_frame);
    for (std::int32_t p : nearer_positions) nearer.push_back(first + p);
    for (std::int32_t p : boundary_positions) at.push_back(first + p);
  }
  return kept;
}

// Buckets of the top 11 bits of a score's float32 value, in the scores' order (a higher bucket
// holds only higher scores; -0 and +0 share one).
inline std::uint32_t score_bucket(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value + 0.0f);
  return ((bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u) >> 21;
}

// The rank-th highest (1-based) of the keys' scores, and how many scores are above it: buckets
// find the few scores around it, which are ranked exactly. Branch-light: a plain partial sort of
// a row takes several times longer.
template <typename Score>
std::pair<Score, std::ptrdiff_t> rank_threshold(const std::vector<std::int32_t>& keys, const Score* scores,
                                                std::ptrdiff_t rank) {
  thread_local std::vector<std::int32_t> histogram;
  thread_local std::vector<std::uint16_t> bucket_of;
  thread_local std::vector<Score> near;
  histogram.assign(2048, 0);
  bucket_of.resize(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    bucket_of[i] = static_cast<std::uint16_t>(score_bucket(static_cast<float>(scores[keys[i]])));
    ++histogram[bucket_of[i]];
  }
  std::ptrdiff_t above = 0;
  std::uint32_t bucket = 2047;
  while (above + histogram[bucket] < rank) above += histogram[bucket--];
  near.clear();
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (bucket_of[i] == bucket) near.push_back(scores[keys[i]]);
  const auto nth = near.begin() + (rank - above - 1);
  std::nth_element(near.begin(), nth, near.end(), std::greater<Score>());
  const Score threshold = *nth;
  for (auto v = near.begin(); v != nth; ++v) above += *v > threshold;
  return {threshold, above};
}

// The keys ordered by (distance, higher score, lower index) and the first `more` of them kept.
// Every key nearer than the distance at which the budget runs out is kept whatever its score, so
// only the keys at that distance are ranked (the whole candidate set for textural heads, whose
// distances are all 0).
template <typename Score>
void select_tiles(const RainTiles& tiles, RainPattern pattern, std::int64_t query, const Score* scores,
                  std::int64_t keep, std::vector<std::int32_t>& scratch, std::vector<std::int32_t>& out) {
  const std::int64_t sink = std::min(tiles.patches_per_frame(), tiles.video_tiles);
  out.resize(static_cast<std::size_t>(sink));
  std::iota(out.begin(), out.end(), 0);
  const std::int64_t more = std::min(keep, tiles.video_tiles) - sink;
  if (more <= 0) return;
  std::int64_t nearer = 0;  // keys kept whatever their scores, in `out` after the sink
  if (pattern == RainPattern::kSpatial) {
    nearer = collect_spatial(tiles, query, more, out, scratch);
  } else if (pattern == RainPattern::kTemporal) {
    nearer = collect_temporal(tiles, query, more, out, scratch);
  } else {
    scratch.resize(static_cast<std::size_t>(tiles.video_tiles - sink));
    std::iota(scratch.begin(), scratch.end(), static_cast<std::int32_t>(sink));
  }
  // The ranked keys kept: every one above the rest-th highest score, then those at it, lower index first.
  const auto rest = static_cast<std::ptrdiff_t>(more - nearer);
  const auto middle = static_cast<std::ptrdiff_t>(out.size());
  if (rest == static_cast<std::ptrdiff_t>(scratch.size())) {
    out.insert(out.end(), scratch.begin(), scratch.end());
  } else {
    const auto [threshold, greater] = rank_threshold(scratch, scores, rest);
    std::ptrdiff_t at_threshold = rest - greater;
    out.resize(static_cast<std::size_t>(middle + rest) + 1);  // one spare slot: every key is written, the kept advance
    std::size_t n = static_cast<std::size_t>(middle);
    for (std::int32_t key : scratch) {
      const bool above = scores[key] > threshold, at = scores[key] == threshold && at_threshold > 0;
      at_threshold -= at;
      out[n] = key;
      n += above || at;
    }
    out.resize(n);
  }
  // Both runs are ascending (the candidates come in index order).
  std::inplace_merge(out.begin() + sink, out.begin() + middle, out.end());
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

std::int64_t rain_listed_video_tiles(const RainTiles& tiles, std::int64_t keep) {
  return RainListShape::of(tiles.video_tiles, tiles.text_tiles, tiles.patches_per_frame(), keep).listed;
}

void rain_select_tiles(const RainTiles& tiles, RainPattern pattern, std::int64_t query, const double* scores,
                       std::int64_t keep, std::vector<std::int32_t>& scratch, std::vector<std::int32_t>& out) {
  select_tiles(tiles, pattern, query, scores, keep, scratch, out);
}

void rain_select_tiles(const RainTiles& tiles, RainPattern pattern, std::int64_t query, const float* scores,
                       std::int64_t keep, std::vector<std::int32_t>& scratch, std::vector<std::int32_t>& out) {
  select_tiles(tiles, pattern, query, scores, keep, scratch, out);
}

}  // namespace diffattn
