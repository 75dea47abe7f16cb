// FASTVIDEO_VSA's CUDA launch shapes, checked on the CPU.
#include <gtest/gtest.h>

#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/sparse/vsa_cuda_config.h"

namespace diffattn::vsa {
namespace {

// An H200's opt-in shared memory per block.
constexpr std::int64_t kHopperSmemPerBlock = 227 * 1024;

TEST(VsaCudaConfig, EveryCompiledHeadSizeHasAFineBranchKernel) {
  for (int d : kCudaHeadSizes) EXPECT_TRUE(flash::is_block_sparse_head_size(d)) << d;
  EXPECT_EQ(cuda_head_sizes_text(), "64, 128");
  EXPECT_FALSE(is_cuda_head_size(96));
}

TEST(VsaCudaConfig, ScoresRowsAreWholeSixteenByteUnits) {
  EXPECT_EQ(coarse_score_ld(1), 4);
  EXPECT_EQ(coarse_score_ld(624), 624);
  EXPECT_EQ(coarse_score_ld(1441), 1444);
}

TEST(VsaCudaConfig, APassKeepsItsScoresWithinTheWorkspaceBound) {
  // 720p and 480p Wan (1440 and 624 cubes, 8.3 and 1.6 MB of scores a head): a call's 40 heads
  // in one pass.
  EXPECT_EQ(coarse_heads_per_pass(1440, 40), 40);
  EXPECT_EQ(coarse_heads_per_pass(624, 40), 40);
  // 1080p (21 x 68 x 120 latent tokens, 3060 cubes, 37.5 MB a head): 14 heads a pass.
  EXPECT_EQ(coarse_heads_per_pass(3060, 40), 14);
  EXPECT_LE(14 * 3060 * 3060 * 4, kCoarseScoreBytes);
  EXPECT_GT(15 * 3060 * 3060 * 4, kCoarseScoreBytes);
  // A head too large for the bound still runs, alone.
  EXPECT_EQ(coarse_heads_per_pass(20000, 3), 1);
  // Never more than the grid's third dimension takes.
  EXPECT_EQ(coarse_heads_per_pass(8, 1 << 20), 65535);
}

TEST(VsaCudaConfig, TopKBlocksTakeTheMostWarpsWhoseRowsFit) {
  EXPECT_EQ(coarse_top_k_smem_bytes(2, 100), 2 * (100 * 4 + 1024));
  // 720p Wan: eight rows of 1440 scores in 54 KB.
  EXPECT_EQ(coarse_top_k_warps(1440, kHopperSmemPerBlock), 8);
  // Longer rows take fewer warps, down to one.
  EXPECT_EQ(coarse_top_k_warps(20000, kHopperSmemPerBlock), 2);
  EXPECT_EQ(coarse_top_k_warps(50000, kHopperSmemPerBlock), 1);
  // A row past the block's shared memory: refused.
  EXPECT_EQ(coarse_top_k_warps(60000, kHopperSmemPerBlock), 0);
  EXPECT_GT(coarse_top_k_smem_bytes(1, 60000), kHopperSmemPerBlock);
}

}  // namespace
}  // namespace diffattn::vsa
