#pragma once
// RAINFUSION_ATTN's block masks: which video key tiles a video query tile keeps under each head
// pattern, at a tile budget set by the sparsity. Plain functions over RainTiles and block scores
// (scale x mean(Q of the query tile) . mean(K of the key tile)), testable alone.
//
// Every mask holds the first frame's tiles (the sink) and is filled to the budget in the pattern's
// order: spatial heads take the query's own frame first, then the nearest frames; temporal heads
// take the query's own patch position in every frame first, then the nearest positions; textural
// heads take the key tiles of highest block score. Within one distance the higher block score goes
// first, then the lower tile index. Text tiles are not part of these masks: they are always kept.

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/sparse/rainfusion_tiles.h"

namespace diffattn {

enum class RainPattern { kSpatial, kTemporal, kTextural };
inline constexpr RainPattern kRainPatterns[] = {RainPattern::kSpatial, RainPattern::kTemporal, RainPattern::kTextural};

std::string_view rain_pattern_name(RainPattern pattern);  // "spatial", "temporal", "textural"

// Video key tiles each video query tile keeps at `sparsity` in [0, 1]: round((1 - sparsity) x
// video tiles), at least 1. The sink is kept even where it alone is larger.
std::int64_t rain_keep_tiles(double sparsity, std::int64_t video_tiles);

// How many video key tiles rain_select_tiles lists at `keep`: keep, or the sink where it is larger.
std::int64_t rain_listed_video_tiles(const RainTiles& tiles, std::int64_t keep);

// The video key tiles of query tile `query` (a video tile) under `pattern`, ascending, into `out`.
// `scores` holds the query tile's block score against each video key tile (float64 on the CPU,
// float32 from the GPU); `scratch` is reused.
void rain_select_tiles(const RainTiles& tiles, RainPattern pattern, std::int64_t query, const double* scores,
                       std::int64_t keep, std::vector<std::int32_t>& scratch, std::vector<std::int32_t>& out);
void rain_select_tiles(const RainTiles& tiles, RainPattern pattern, std::int64_t query, const float* scores,
                       std::int64_t keep, std::vector<std::int32_t>& scratch, std::vector<std::int32_t>& out);

}  // namespace diffattn
