// SAGE_ATTN's Hopper kernel shape rule (kernels/cuda/sage/sage_config.h), on the CPU.
#include "kernels/cuda/sage/sage_config.h"

#include <gtest/gtest.h>

namespace diffattn::sage {
namespace {

TEST(SageConfig, QueryTilesCoverEveryRow) {
  for (int groups : {2, 3})
    for (std::int64_t rows : {1, 63, 64, 127, 128, 129, 191, 192, 193, 4608, 32760}) {
      const std::int64_t tile = 64 * groups, blocks = sage_m_blocks(rows, groups);
      EXPECT_GE(blocks * tile, rows) << rows << " rows, " << groups << " groups";
      EXPECT_LT((blocks - 1) * tile, rows) << rows << " rows, " << groups << " groups";
    }
  EXPECT_EQ(sage_m_blocks(0, 3), 0);
}

// The measured rule: three in-order groups at hd128; at hd64 four from 1024 query rows where P V
// is FP8 (SAGE_ATTN's default mode, QK16/V8) and two below, and in the 16-bit P V mode two up to
// 1536 rows and three above.
TEST(SageConfig, GroupsFollowTheMeasuredRule) {
  for (std::int64_t rows : {1, 512, 4096, 4429, 32760}) {
    EXPECT_EQ(sage_consumer_groups(128, rows), 3) << rows;
    EXPECT_EQ(sage_consumer_groups(128, rows, false, /*pv_fp8=*/false), 3) << rows;
    EXPECT_EQ(sage_consumer_groups(128, rows, /*qk16=*/true), 3) << rows;
  }
  // FP8 P V at hd64: two below kSageHd64FourGroupMinRows, four from there on.
  EXPECT_EQ(sage_consumer_groups(64, 1), 2);
  EXPECT_EQ(sage_consumer_groups(64, kSageHd64FourGroupMinRows - 1), 2);
  EXPECT_EQ(sage_consumer_groups(64, kSageHd64FourGroupMinRows), 4);
  EXPECT_EQ(sage_consumer_groups(64, 4096), 4);  // the 4k square
  EXPECT_EQ(sage_consumer_groups(64, 16384), 4);
  EXPECT_EQ(sage_consumer_groups(64, 512, /*qk16=*/true), 2);
  EXPECT_EQ(sage_consumer_groups(64, 4429, /*qk16=*/true), 4);  // SD3
  // 16-bit P V at hd64: two up to kSageHd64TwoGroupMaxRows, three above.
  EXPECT_EQ(sage_consumer_groups(64, 1024, false, /*pv_fp8=*/false), 2);
  EXPECT_EQ(sage_consumer_groups(64, kSageHd64TwoGroupMaxRows, false, /*pv_fp8=*/false), 2);
  EXPECT_EQ(sage_consumer_groups(64, kSageHd64TwoGroupMaxRows + 1, false, /*pv_fp8=*/false), 3);
  EXPECT_EQ(sage_consumer_groups(64, 4096, false, /*pv_fp8=*/false), 3);
  // Four groups exist at hd64 with FP8 P V only.
  EXPECT_TRUE(sage_four_groups_fit(64, true));
  EXPECT_FALSE(sage_four_groups_fit(64, false));
  EXPECT_FALSE(sage_four_groups_fit(128, true));
}

// A last wave of fewer tiles than half the SMs runs as pieces, each CTA at most one; the pieces of
// a tile cover its key blocks once, in order, each at least kSageMinPieceBlocks long.
// Only the three-group FP8 kernel quantizes Q itself: by the rule on hd128 calls of enough keys
// whose last wave is not split, or wherever a caller asks; a caller can also ask for the Q pass.
TEST(SageConfig, TheThreeGroupFp8KernelQuantizesQItselfOnHd128CallsOfEnoughKeys) {
  EXPECT_TRUE(sage_fuse_q(3, true, 128, kSageFuseQMinKeys, false));
  EXPECT_TRUE(sage_fuse_q(3, true, 128, 32760, false));
  EXPECT_FALSE(sage_fuse_q(3, true, 128, kSageFuseQMinKeys - 1, false));
  EXPECT_FALSE(sage_fuse_q(3, true, 128, 512, false));  // text cross-attention
  EXPECT_FALSE(sage_fuse_q(3, true, 128, 4608, true));  // FLUX.1: its last wave splits
  EXPECT_FALSE(sage_fuse_q(3, true, 64, 16384, false));
  EXPECT_TRUE(sage_fuse_q(3, true, 64, 512, true, 1));
  EXPECT_FALSE(sage_fuse_q(3, true, 128, 32760, false, 0));
  EXPECT_FALSE(sage_fuse_q(2, true, 128, 32760, false));
  EXPECT_FALSE(sage_fuse_q(2, true, 128, 32760, false, 1));
  EXPECT_FALSE(sage_fuse_q(3, false, 128, 32760, false));
  EXPECT_FALSE(sage_fuse_q(3, false, 128, 32760, false, 1));
  // FLUX.1's 576 tiles of 192 rows on 132 SMs leave a last wave of 48: split, so the Q pass runs.
  EXPECT_GT(sage_tail_split(576, 132, 36).pieces, 1);
}

TEST(SageConfig, ShortLastWavesRunAsPiecesOfOnePerCta) {
  // FLUX.1 and SD3: 576 tiles of 192 rows on 132 SMs leave 48, run as two pieces each.
  SageTailSplit flux = sage_tail_split(576, 132, 36);
  EXPECT_EQ(flux.split_begin, 528);
  EXPECT_EQ(flux.pieces, 2);
  EXPECT_EQ(flux.items, 528 + 96);
  // Fewer tiles than SMs: every tile is split.
  SageTailSplit few = sage_tail_split(24, 132, 64);
  EXPECT_EQ(few.split_begin, 0);
  EXPECT_EQ(few.pieces, 5);
  EXPECT_EQ(few.items, 120);
  // No gain: full waves, a last wave of more than half the SMs, or too few key blocks to cut.
  for (const SageTailSplit& none : {sage_tail_split(1320, 132, 64), sage_tail_split(1440, 132, 90),
                                    sage_tail_split(576, 132, 7), sage_tail_split(0, 132, 36)}) {
    EXPECT_EQ(none.pieces, 1);
    EXPECT_EQ(none.items, none.split_begin);
  }
  for (std::int64_t tiles : {1, 5, 48, 131, 133, 200, 576, 6840})
    for (int sms : {1, 78, 132})
      for (std::int64_t blocks : {1, 4, 8, 9, 36, 256}) {
        const SageTailSplit s = sage_tail_split(tiles, sms, blocks);
        const std::int64_t tail = tiles - s.split_begin;
        EXPECT_EQ(s.items, s.split_begin + tail * s.pieces);
        if (s.pieces == 1) continue;
        EXPECT_EQ(s.split_begin % sms, 0);
        EXPECT_LE(tail * s.pieces, sms) << tiles << " tiles, " << sms << " SMs";
        EXPECT_LE(s.pieces, kSageMaxPieces);
        EXPECT_EQ(sage_piece_begin(blocks, s.pieces, 0), 0);
        EXPECT_EQ(sage_piece_begin(blocks, s.pieces, s.pieces), blocks);
        for (int k = 0; k < s.pieces; ++k)
          EXPECT_GE(sage_piece_begin(blocks, s.pieces, k + 1) - sage_piece_begin(blocks, s.pieces, k),
                    kSageMinPieceBlocks);
      }
}

// K and V in the kernel: the pairs the first one and a half waves of tiles read stay with the K/V
// pass, every pair those tiles read among them, and never more pairs than there are.
TEST(SageConfig, TheKvPassKeepsThePairsTheFirstWavesRead) {
  // FLUX.1 (24 heads, 24 row blocks of 192) on 132 SMs: tiles 0-197 read heads 0-8.
  EXPECT_EQ(sage_kv_from(576, 24, 132, 24, 24, 24), 9);
  // Wan2.2-5B (24 heads, 60 row blocks): tiles 0-197 read heads 0-3.
  EXPECT_EQ(sage_kv_from(1440, 60, 132, 24, 24, 24), 4);
  // GQA (32 query heads on 8 kv heads), two sequences of 11 row blocks: tiles 0-197 read query
  // heads 0-17 of the first sequence, kv heads 0-4.
  EXPECT_EQ(sage_kv_from(704, 11, 132, 32, 8, 16), 5);
  for (std::int64_t m_blocks : {1, 3, 24, 60})
    for (int heads_q : {1, 8, 24, 40})
      for (int group : {1, 2, 8})
        for (std::int64_t batch : {1, 2, 3}) {
          if (heads_q % group != 0) continue;
          const int heads_kv = heads_q / group;
          const std::int64_t pairs = batch * heads_kv, tiles = m_blocks * batch * heads_q;
          for (std::int64_t grid : {std::int64_t{1}, std::min<std::int64_t>(tiles, 78), std::min<std::int64_t>(tiles, 132)}) {
            const std::int64_t from = sage_kv_from(tiles, m_blocks, grid, heads_q, heads_kv, pairs);
            EXPECT_GE(from, 1);
            EXPECT_LE(from, pairs);
            const std::int64_t ahead = std::min(tiles, grid + grid / 2);
            for (std::int64_t t = 0; t < ahead; ++t) {
              const std::int64_t bhq = t / m_blocks;
              EXPECT_LT((bhq / heads_q) * heads_kv + (bhq % heads_q) / group, from) << "tile " << t;
            }
          }
        }
  EXPECT_TRUE(sage_kv_in_kernel_fits(3, true, true, false));
  EXPECT_TRUE(sage_kv_in_kernel_fits(4, true, true, false));
  EXPECT_FALSE(sage_kv_in_kernel_fits(2, true, true, false));  // the overlapped groups
  EXPECT_FALSE(sage_kv_in_kernel_fits(3, false, true, false));  // the accurate mode
  EXPECT_FALSE(sage_kv_in_kernel_fits(3, true, false, false));  // QK16/V8
  EXPECT_FALSE(sage_kv_in_kernel_fits(3, true, true, true));   // block-sparse lists or a key walk
}

// The measured rule: with the Q pass from 4096 keys, in the kernel that quantizes Q itself from
// 10240; a request overrides it either way.
TEST(SageConfig, KAndVGoToTheKernelWhereThatMeasuredFaster) {
  EXPECT_FALSE(sage_kv_in_kernel(false, 512));    // cross-attention: 3 % slower
  EXPECT_TRUE(sage_kv_in_kernel(false, 4429));    // SD3
  EXPECT_TRUE(sage_kv_in_kernel(false, 4608));    // FLUX.1 (level)
  EXPECT_FALSE(sage_kv_in_kernel(true, 4096));    // the 4k square, Q quantized by the kernel: 34 % slower
  EXPECT_FALSE(sage_kv_in_kernel(true, 8192));
  EXPECT_TRUE(sage_kv_in_kernel(true, 11440));    // Wan2.2-5B
  EXPECT_TRUE(sage_kv_in_kernel(true, 14040));    // HunyuanVideo-1.5
  EXPECT_FALSE(sage_kv_in_kernel(true, 32760, 0));
  EXPECT_TRUE(sage_kv_in_kernel(false, 512, 1));
}

}  // namespace
}  // namespace diffattn::sage
