// FASTVIDEO_VSA's CUDA launch shapes, checked on the CPU.
#include <gtest/gtest.h>

#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/sparse/vsa_cuda_config.h"

namespace diffattn::vsa {
namespace {

// An H200's shared memory: the opt-in per block and the whole SM.
constexpr std::int64_t kHopperSmemPerBlock = 227 * 1024, kHopperSmemPerSm = 228 * 1024;

TEST(VsaCudaConfig, EveryCompiledHeadSizeHasAFineBranchKernel) {
  for (int d : kCudaHeadSizes) EXPECT_TRUE(flash::is_block_sparse_head_size(d)) << d;
  EXPECT_EQ(cuda_head_sizes_text(), "64, 128");
  EXPECT_FALSE(is_cuda_head_size(96));
}

TEST(VsaCudaConfig, CoarseBlocksTakeTheMostQueryCubesWithWhichTwoShareAnSm) {
  // Few cubes: four query cubes per warp, two blocks an SM.
  EXPECT_EQ(coarse_queries_per_warp(8, 64, kHopperSmemPerBlock, kHopperSmemPerSm), 4);
  EXPECT_EQ(coarse_queries_per_warp(300, 128, kHopperSmemPerBlock, kHopperSmemPerSm), 4);
  // 720p Wan (21 x 45 x 80 latent tokens: 1440 cubes): one per warp keeps two blocks an SM.
  EXPECT_EQ(coarse_queries_per_warp(1440, 128, kHopperSmemPerBlock, kHopperSmemPerSm), 1);
  EXPECT_LE(2 * (coarse_smem_bytes(1, 1440, 128) + kSmemReservedPerBlock), kHopperSmemPerSm);
  // More cubes than two blocks can hold: the most that fit one block.
  EXPECT_EQ(coarse_queries_per_warp(3060, 128, kHopperSmemPerBlock, kHopperSmemPerSm), 2);
  // Scores of even one query cube per warp past the block's shared memory: refused.
  EXPECT_EQ(coarse_queries_per_warp(7000, 128, kHopperSmemPerBlock, kHopperSmemPerSm), 0);
  EXPECT_GT(coarse_smem_bytes(1, 7000, 128), kHopperSmemPerBlock);
}

TEST(VsaCudaConfig, SharedMemoryHoldsMeansAKeyTileScoresAndSums) {
  // 8 warps x 2 query cubes: 16 means of 64, 32 key rows of 68, 16 x 100 scores, 16 sums.
  EXPECT_EQ(coarse_smem_bytes(2, 100, 64), 4 * (16 * 68 + 32 * 68 + 16 * 100 + 16));
}

}  // namespace
}  // namespace diffattn::vsa
