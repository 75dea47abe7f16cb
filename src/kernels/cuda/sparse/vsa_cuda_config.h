#pragma once
// Launch shapes of FASTVIDEO_VSA's CUDA kernels as plain functions: vsa_cuda.cu launches from them
// and CPU tests check them without a GPU.

#include <array>
#include <cstdint>
#include <string>

#include "common/strings.h"

namespace diffattn::vsa {

// The head sizes the CUDA path compiles (the gather, pooling and coarse kernels, and the fine
// branch's 64 x 64 block-sparse tiles).
inline constexpr std::array<int, 2> kCudaHeadSizes = {64, 128};

constexpr bool is_cuda_head_size(std::int64_t head_size) {
  for (int d : kCudaHeadSizes)
    if (d == head_size) return true;
  return false;
}

inline std::string cuda_head_sizes_text() {
  return join(kCudaHeadSizes, ", ", "", [](int d) { return std::to_string(d); });
}

// The coarse branch's GEMMs (vsa_coarse_kernel.cuh): 128 x 128 outputs a block of 256 threads,
// 16 of the depth staged at a time.
inline constexpr int kCoarseGemmTile = 128, kCoarseGemmDepth = 16, kCoarseGemmThreads = 256;
// A pass of the coarse branch keeps its heads' scores within this much workspace.
inline constexpr std::int64_t kCoarseScoreBytes = std::int64_t{512} << 20;
// The top-k's warps per block, most first.
inline constexpr int kCoarseTopKWarps[] = {8, 4, 2, 1};

// Row stride of the scores in floats: the cubes rounded up to 4 (16-byte rows).
constexpr std::int64_t coarse_score_ld(std::int64_t cubes) { return (cubes + 3) / 4 * 4; }

// Heads (sequence, query head pairs) per pass of the coarse branch: as many of `heads` as keep
// their scores within `budget` bytes, at least one, at most 65535 (the GEMM grid's third
// dimension).
constexpr std::int64_t coarse_heads_per_pass(std::int64_t cubes, std::int64_t heads,
                                             std::int64_t budget = kCoarseScoreBytes) {
  const std::int64_t per_head = cubes * coarse_score_ld(cubes) * 4;
  std::int64_t n = per_head > 0 ? budget / per_head : heads;
  if (n > heads) n = heads;
  if (n > 65535) n = 65535;
  return n < 1 ? 1 : n;
}

// A top-k block's shared memory: each warp's row of scores and its 256-word histogram.
constexpr std::int64_t coarse_top_k_smem_bytes(int warps, std::int64_t cubes) {
  return std::int64_t{warps} * (coarse_score_ld(cubes) * 4 + 256 * 4);
}

// The most warps per top-k block whose rows fit the block's shared memory; 0 when one row does not.
constexpr int coarse_top_k_warps(std::int64_t cubes, std::int64_t smem_per_block) {
  for (int warps : kCoarseTopKWarps)
    if (coarse_top_k_smem_bytes(warps, cubes) <= smem_per_block) return warps;
  return 0;
}

}  // namespace diffattn::vsa
