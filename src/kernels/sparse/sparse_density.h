#pragma once
// The share of (query tile, key tile) pairs a sparse video backend computes on a call, from its
// options and the call's geometry alone, as the runner reports it beside time and error: for
// FASTVIDEO_VSA topk over the cubes; for RAINFUSION_ATTN the tiles its sparsity keeps per video query
// tile (the first frame's sink included, text dense), on the steps and layers it runs sparse.

#include <optional>
#include <string>

#include "diffattn/config.h"
#include "diffattn/problem.h"

namespace diffattn {

struct SparseDensity {
  double density = 1.0;  // listed tile pairs over all of them, padded tiles counted whole
  std::string detail;    // e.g. "180 of 1440 key cubes per query cube"
};

// None for other backends, or a geometry the backend cannot tile (it refuses such calls itself).
std::optional<SparseDensity> sparse_video_density(const std::string& backend, const AttentionSpec& spec,
                                                  const VideoGeometry& geometry);

}  // namespace diffattn
