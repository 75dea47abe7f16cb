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

// Every coarse-branch block has kCoarseWarps warps; each owns whole query cubes (its rows of
// scores, its top-k and its softmax), and the block stages key cubes kCoarseKeyTile at a time,
// one per lane, for all of them.
inline constexpr int kCoarseWarps = 8;
inline constexpr int kCoarseKeyTile = 32;
inline constexpr int kCoarseQueriesPerWarp[] = {4, 2, 1};  // the instantiated choices, most first
// Shared memory the device keeps per resident block besides the block's own (sm_80 and later).
inline constexpr std::int64_t kSmemReservedPerBlock = 1024;

// A coarse block's shared memory with `per_warp` query cubes per warp: their means (rows padded
// by 4 floats too), the key (or
// value) tile with rows padded by 4 floats (conflict-free 16-byte reads down a column of rows),
// their scores over every key cube, and their softmax sums.
constexpr std::int64_t coarse_smem_bytes(int per_warp, std::int64_t cubes, int head_size) {
  const std::int64_t queries = std::int64_t{kCoarseWarps} * per_warp;
  return 4 * (queries * (head_size + 4) + std::int64_t{kCoarseKeyTile} * (head_size + 4) + queries * cubes + queries);
}

// Query cubes per warp for `cubes` key cubes: the most with which two blocks share an SM (the
// top-k passes over shared memory wait on its latency, which a second block hides), else the
// most with which one block fits; 0 when not even one query cube per warp fits.
constexpr int coarse_queries_per_warp(std::int64_t cubes, int head_size, std::int64_t smem_per_block,
                                      std::int64_t smem_per_sm) {
  for (int per_warp : kCoarseQueriesPerWarp) {
    const std::int64_t bytes = coarse_smem_bytes(per_warp, cubes, head_size);
    if (bytes <= smem_per_block && 2 * (bytes + kSmemReservedPerBlock) <= smem_per_sm) return per_warp;
  }
  for (int per_warp : kCoarseQueriesPerWarp)
    if (coarse_smem_bytes(per_warp, cubes, head_size) <= smem_per_block) return per_warp;
  return 0;
}

}  // namespace diffattn::vsa
