#pragma once
// FASTVIDEO_VSA's tiling of a latent video into 4x4x4 cubes of 64 tokens, plain functions shared
// by its CPU and GPU paths and testable alone (the arithmetic itself: vsa_cube_map.h).
//
// Tokens are reordered into padded cube order rather than indexed in place: cube c occupies slots
// [c * 64, (c + 1) * 64) of a sequence of cubes * 64 slots, its valid tokens first in (frame, row,
// column) order and the rest padding (partial cubes at the far edges of each axis). Every query
// and key tile is then one contiguous 64-row block, the shape the block-sparse kernels tile by
// (fixed TMA boxes on the GPU, the same tiles on the CPU), and the layout's tile rows (each cube's
// valid count) keep padding out of the arithmetic: padding keys are never read and padding query
// rows never computed. The price is memory for the padded slots, 22 % more than tokens at Wan2.1
// 480p's 21 x 30 x 52, none when every extent is a multiple of 4. FastVideo pads the same way.

#include <cstdint>
#include <vector>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/sparse/vsa_cube_map.h"

namespace diffattn {

struct VsaCubes {
  std::int64_t grid_t = 0, grid_h = 0, grid_w = 0;  // cubes along frames, height and width
  std::vector<std::int32_t> valid;  // valid tokens of each cube (64 but at the far edges), in cube order
  std::vector<std::int64_t> slot;   // for each token in raster order, its slot: cube * 64 + position

  std::int64_t count() const { return grid_t * grid_h * grid_w; }
  std::int64_t padded_length() const { return count() * kVsaCubeTokens; }
  bool has_partial_cubes() const;
};

// Cubes in row-major (cube frame, cube row, cube column) order; `g` has positive extents.
VsaCubes tile_video_into_cubes(const VideoGeometry& g);

// The top-k of FastVideo for a sparsity in [0, 1): max(1, min(ceil((1 - sparsity) * cubes), cubes)).
std::int64_t vsa_topk_for_sparsity(double sparsity, std::int64_t cubes);

// kInvalidInput unless 1 <= topk <= the cubes of `g`, saying which topk the geometry can give.
Status check_vsa_topk(std::int64_t topk, const VideoGeometry& g);

// What FASTVIDEO_VSA's CPU and CUDA paths both require of a call: its video geometry without text
// tokens, no mask, cu_seqlens, causal flag or lse, and a topk the geometry can give.
Status check_vsa_problem(const AttentionProblem& problem, std::int64_t topk);

}  // namespace diffattn
