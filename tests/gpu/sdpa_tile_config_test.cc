// The tensor-core SDPA kernel's tile choices and path rules, checked on the CPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/dense/tile_config.h"

namespace diffattn::cuda {
namespace {

TEST(SdpaTileConfig, HeadSizesPadUpToTheSmallestCompiledBucket) {
  EXPECT_EQ(head_dim_bucket(8), 32);
  EXPECT_EQ(head_dim_bucket(32), 32);
  EXPECT_EQ(head_dim_bucket(40), 64);
  EXPECT_EQ(head_dim_bucket(72), 96);
  EXPECT_EQ(head_dim_bucket(80), 96);
  EXPECT_EQ(head_dim_bucket(128), 128);
  EXPECT_EQ(head_dim_bucket(136), 160);
  EXPECT_EQ(head_dim_bucket(200), 256);
  EXPECT_EQ(head_dim_bucket(256), 256);
  EXPECT_EQ(head_dim_bucket(264), 0);
  EXPECT_EQ(head_dim_bucket(0), 0);
}

TEST(SdpaTileConfig, EveryBucketFitsTheSharedMemoryOfTwoBlocksOnHopperAndOneOnAmpere) {
  for (int bucket : kCompiledHeadDims) {
    const TileConfig c = tile_config_for_bucket(bucket);
    EXPECT_EQ(c.block_m, 16 * c.warps * c.m_tiles) << bucket;
    EXPECT_EQ(c.block_n % 16, 0) << bucket;
    EXPECT_EQ(bucket % 16, 0) << bucket;
    const std::size_t bytes = tile_smem_bytes(c, bucket, 2);
    EXPECT_LE(bytes, 163u * 1024u) << "bucket " << bucket << " needs " << bytes << " bytes (sm_80 allows 163 KiB)";
    EXPECT_LE(2 * bytes, 227u * 1024u) << bucket;
  }
}

// Accumulators per thread: output (m_tiles x bucket/8 x 4) plus scores (m_tiles x block_n/8 x 4)
// must leave room for fragments and addresses in 255 registers.
TEST(SdpaTileConfig, AccumulatorsFitTheRegisterFile) {
  for (int bucket : kCompiledHeadDims) {
    const TileConfig c = tile_config_for_bucket(bucket);
    const int accumulators = c.m_tiles * (bucket / 8 + c.block_n / 8) * 4;
    const int q_fragments = c.q_in_registers ? c.m_tiles * bucket / 16 * 4 : 0;
    EXPECT_LE(accumulators + q_fragments, 176) << bucket;
  }
}

// The block-sparse walk runs one CTA per list tile of query rows over whole key blocks of each
// listed tile, within the shared memory and registers of the dense rule, and q_in_registers says
// what the kernel (MmaTile::kQInRegs) does.
TEST(SdpaTileConfig, BlockSparseWalkTakesOneListTilePerBlockInWholeKeyBlocks) {
  for (int bucket : kListedHeadDims)
    for (int tile : kListTiles) {
      const TileConfig c = block_sparse_tile_config(bucket, tile);
      EXPECT_EQ(c.block_m, tile) << bucket << " " << tile;
      EXPECT_EQ(c.block_m, 16 * c.warps * c.m_tiles) << bucket << " " << tile;
      EXPECT_EQ(tile % c.block_n, 0) << bucket << " " << tile;
      EXPECT_EQ(c.block_n, tile_config_for_bucket(bucket).block_n) << bucket << " " << tile;
      EXPECT_EQ(c.q_in_registers, bucket * c.m_tiles <= 128) << bucket << " " << tile;
      EXPECT_LE(tile_smem_bytes(c, bucket, 2), tile_smem_bytes(tile_config_for_bucket(bucket), bucket, 2));
      EXPECT_LE(c.m_tiles * (bucket / 8 + c.block_n / 8) * 4, 176) << bucket << " " << tile;
    }
  // Lists of tiles no CTA shape fits are refused by the tiling, not run.
  EXPECT_EQ(block_sparse_tile_config(128, 96).block_m, 0);
  EXPECT_EQ(block_sparse_tile_config(256, 128).block_m, 0);
}

TEST(SdpaTileConfig, WideHeadsUseNarrowerKeyTilesAndOneMTile) {
  EXPECT_GT(tile_config_for_bucket(64).block_n, tile_config_for_bucket(256).block_n);
  EXPECT_EQ(tile_config_for_bucket(128).m_tiles, 2);
  EXPECT_EQ(tile_config_for_bucket(256).m_tiles, 1);
  EXPECT_TRUE(tile_config_for_bucket(64).q_in_registers);
  EXPECT_FALSE(tile_config_for_bucket(256).q_in_registers);
}

// ldmatrix reads 16 bytes from each of 8 rows: those must fall in 8 different 16-byte bank groups.
TEST(SdpaTileConfig, EightConsecutiveRowsStartInDistinctBankGroups) {
  for (int bucket : kCompiledHeadDims) {
    std::vector<bool> seen(8, false);
    for (int row = 0; row < 8; ++row) {
      const int group = (row * smem_row_pitch(bucket) * 2 % 128) / 16;
      EXPECT_FALSE(seen[group]) << "bucket " << bucket << " row " << row;
      seen[group] = true;
    }
  }
}

SdpaParams dit_params() {
  SdpaParams p;
  alignas(16) static std::uint8_t storage[64];
  p.dtype = DType::kBFloat16;
  p.q = p.k = p.v = storage;
  p.out = storage + 16;
  p.batch = 1, p.heads_q = p.heads_kv = 24, p.seqlen_q = p.seqlen_kv = 4096, p.head_dim = p.head_dim_v = 128;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = 24 * 128;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = 128;
  p.scale = 0.088f;
  return p;
}

TEST(SdpaPlan, DiTLayoutsTakeTheTensorCorePath) { EXPECT_TRUE(mma_path_reasons(dit_params()).empty()); }

TEST(SdpaPlan, EachRuleOutsideTheTensorCorePathIsNamed) {
  struct Case {
    const char* expect;
    void (*edit)(SdpaParams&);
  };
  const Case cases[] = {
      {"float32", [](SdpaParams& p) { p.dtype = DType::kFloat32; }},
      {"above the largest compiled bucket", [](SdpaParams& p) { p.head_dim = p.head_dim_v = 320; }},
      {"not multiples of 8", [](SdpaParams& p) { p.head_dim = p.head_dim_v = 12; }},
      {"contiguous", [](SdpaParams& p) { p.k_col_stride = 2; }},
      {"16-byte boundary", [](SdpaParams& p) { p.q_row_stride = 24 * 128 + 4; }},
      {"16-byte boundary", [](SdpaParams& p) { p.out = static_cast<char*>(p.out) + 2; }},
      {"positive finite", [](SdpaParams& p) { p.scale = -1.f; }},
  };
  for (const Case& c : cases) {
    SdpaParams p = dit_params();
    c.edit(p);
    const std::vector<std::string> reasons = mma_path_reasons(p);
    ASSERT_EQ(reasons.size(), 1u) << c.expect;
    EXPECT_NE(reasons[0].find(c.expect), std::string::npos) << reasons[0];
  }
}

TEST(SdpaPlan, ParamsFollowTheViewsStridesAndBroadcastMasks) {
  alignas(16) static std::uint8_t storage[64];
  AttentionProblem p;
  p.q = TensorView::Contiguous(storage, DType::kFloat16, {2, 10, 8, 64});
  p.k = TensorView::Contiguous(storage, DType::kFloat16, {2, 12, 2, 64});
  p.v = p.k;
  p.out = p.q;
  p.mask = TensorView::Contiguous(storage, DType::kBool, {1, 8, 10, 12});
  p.causal = true;
  auto made = make_sdpa_params(p);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->heads_kv, 2);
  EXPECT_EQ(made->q_row_stride, 8 * 64);
  EXPECT_EQ(made->mask_batch_stride, 0);  // broadcast batch
  EXPECT_EQ(made->mask_head_stride, 120);
  EXPECT_EQ(made->mask_row_stride, 12);
  EXPECT_NEAR(made->scale, 0.125f, 1e-7);
  EXPECT_NEAR(made->scale_log2, 0.125f * 1.44269504f, 1e-6);
  EXPECT_TRUE(made->causal);

  p.mask = TensorView::Contiguous(storage, DType::kBool, {2, 12});  // key padding: no row or head stride
  made = make_sdpa_params(p);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made->mask_batch_stride, 12);
  EXPECT_EQ(made->mask_row_stride, 0);
  EXPECT_EQ(made->mask_head_stride, 0);
}

}  // namespace
}  // namespace diffattn::cuda
