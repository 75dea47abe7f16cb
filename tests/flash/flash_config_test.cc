#include "kernels/cuda/flash/flash_config.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace diffattn::flash {
namespace {

constexpr KeyTiles kAllKeyTiles[] = {KeyTiles::kShort, KeyTiles::kLong, KeyTiles::kWide, KeyTiles::kInOrder};

TEST(FlashConfig, HeadSizesAreTheDocumentedList) {
  for (int d : {64, 96, 128, 192, 256}) EXPECT_TRUE(is_supported_head_size(d)) << d;
  for (int d : {0, 8, 32, 80, 100, 160, 512}) EXPECT_FALSE(is_supported_head_size(d)) << d;
  EXPECT_EQ(supported_head_sizes_text(), "64, 96, 128, 192, 256");
}

TEST(FlashConfig, EveryTileFitsSharedMemoryAndWgmmaShapes) {
  for (int d : kHeadSizes) {
    for (KeyTiles keys : kAllKeyTiles) {
      const HopperTile t = hopper_tile(d, keys);
      EXPECT_EQ(t.block_m, 64 * t.consumer_warpgroups) << d;
      EXPECT_EQ(t.block_n % 16, 0) << d;  // P V reduces over block_n in k16 steps
      EXPECT_GE(t.block_n, 64) << d;
      EXPECT_LE(t.block_n, 256) << d;  // wgmma N limit for Q K^T
      EXPECT_GE(t.stages, 2) << d;
      EXPECT_TRUE(t.consumer_warpgroups == 2 || t.consumer_warpgroups == 3) << d;  // 128 or 192 query rows
      EXPECT_LE(hopper_smem_bytes(t, d), kHopperSmemLimit) << "head size " << d << " keys " << static_cast<int>(keys);
    }
  }
}

TEST(FlashConfig, StagedOutputLeavesThroughTma) {
  for (int d : kHeadSizes)
    for (KeyTiles keys : kAllKeyTiles) {
      const HopperTile t = hopper_tile(d, keys);
      EXPECT_EQ(t.tma_store, t.staged_epilogue) << "head size " << d << " keys " << static_cast<int>(keys);
    }
}

TEST(FlashConfig, StagedEpilogueExactlyWhereItsBufferFits) {
  EXPECT_TRUE(hopper_tile(64, KeyTiles::kShort).staged_epilogue);
  EXPECT_TRUE(hopper_tile(128, KeyTiles::kShort).staged_epilogue);
  EXPECT_TRUE(hopper_tile(96, KeyTiles::kShort).staged_epilogue);
  EXPECT_FALSE(hopper_tile(128, KeyTiles::kLong).staged_epilogue);  // 176-key tiles leave no room
  EXPECT_FALSE(hopper_tile(256, KeyTiles::kShort).staged_epilogue);
  EXPECT_FALSE(hopper_tile(192, KeyTiles::kShort).staged_epilogue);
}

// Turn-taking only where it was measured to help: the 176-key tiles of long hd96/hd128 rows.
TEST(FlashConfig, WarpgroupsTakeTurnsOnlyOnLongRowTiles) {
  EXPECT_TRUE(hopper_tile(128, KeyTiles::kLong).issue_in_turn);
  EXPECT_TRUE(hopper_tile(96, KeyTiles::kLong).issue_in_turn);
  EXPECT_FALSE(hopper_tile(128, KeyTiles::kShort).issue_in_turn);
  EXPECT_FALSE(hopper_tile(64, KeyTiles::kLong).issue_in_turn);
  EXPECT_FALSE(hopper_tile(256, KeyTiles::kLong).issue_in_turn);
  HopperTile staged = hopper_base_tile(128, KeyTiles::kShort), direct = staged;
  staged.staged_epilogue = true;
  EXPECT_EQ(hopper_smem_bytes(staged, 128) - hopper_smem_bytes(direct, 128), 128 * 128 * 2);
}

// Row sums through the P V product only at hd64, whose value tile is one 64-column chunk (the
// tile of ones sits one chunk stride past it); its shared memory counts the ones tile.
TEST(FlashConfig, RowSumsByTheProductOnlyAtHd64) {
  for (KeyTiles keys : kAllKeyTiles) {
    EXPECT_TRUE(hopper_tile(64, keys).row_sum_by_mma);
    for (int d : {96, 128, 192, 256}) EXPECT_FALSE(hopper_tile(d, keys).row_sum_by_mma) << d;
  }
  HopperTile with = hopper_tile(64, KeyTiles::kShort), without = with;
  without.row_sum_by_mma = false;
  EXPECT_EQ(hopper_smem_bytes(with, 64) - hopper_smem_bytes(without, 64), with.stages * with.block_n * 128);
}

// Early exponentials only where they were measured to win without spilling: the two-group
// 128-key hd128 tiles.
TEST(FlashConfig, EarlyExponentialsOnlyOnTwoGroup128KeyHd128Tiles) {
  EXPECT_TRUE(hopper_tile(128, KeyTiles::kShort).early_exp);
  EXPECT_FALSE(hopper_tile(128, KeyTiles::kLong).early_exp);     // 176-key tiles
  EXPECT_FALSE(hopper_tile(128, KeyTiles::kWide).early_exp);     // 192-key tiles spill
  EXPECT_FALSE(hopper_tile(128, KeyTiles::kInOrder).early_exp);  // three groups spill
  for (int d : {64, 96, 192, 256})
    for (KeyTiles keys : kAllKeyTiles) EXPECT_FALSE(hopper_tile(d, keys).early_exp) << d;
}

// The in-order family: three consumer warpgroups (192 rows) on 128-key tiles at hd128, each group
// running its blocks without overlapping its own softmax, with the staged TMA-store epilogue.
TEST(FlashConfig, InOrderTilesAreThreeGroupsOfSequentialBlocksAtHd128) {
  const HopperTile t = hopper_tile(128, KeyTiles::kInOrder);
  EXPECT_EQ(t.block_m, 192);
  EXPECT_EQ(t.block_n, 128);
  EXPECT_EQ(t.consumer_warpgroups, 3);
  EXPECT_FALSE(t.overlap);
  EXPECT_TRUE(t.staged_epilogue);  // 225 KiB: Q, two K/V stages and the O buffer
  EXPECT_FALSE(t.issue_in_turn);
  for (KeyTiles keys : {KeyTiles::kShort, KeyTiles::kLong, KeyTiles::kWide}) EXPECT_TRUE(hopper_tile(128, keys).overlap);
  for (int d : {64, 96, 192, 256}) EXPECT_TRUE(hopper_tile(d, KeyTiles::kInOrder).overlap) << d;
}

TEST(FlashConfig, KeyMaskedCallsLeaveTheWideTileForTheLongOne) {
  EXPECT_EQ(key_masked_tiles(128, KeyTiles::kWide, true, false), KeyTiles::kLong);
  EXPECT_EQ(key_masked_tiles(128, KeyTiles::kWide, false, false), KeyTiles::kWide);
  EXPECT_EQ(key_masked_tiles(128, KeyTiles::kWide, true, true), KeyTiles::kWide);  // causal: the live-bits walk
  for (KeyTiles keys : {KeyTiles::kShort, KeyTiles::kLong, KeyTiles::kInOrder})
    EXPECT_EQ(key_masked_tiles(128, keys, true, false), keys);
  // Every tile a key-masked call can take has the compact walk.
  for (int d : kHeadSizes)
    for (KeyTiles keys : {KeyTiles::kShort, KeyTiles::kLong, KeyTiles::kWide, KeyTiles::kInOrder})
      EXPECT_TRUE(compact_walk_fits(d, hopper_tile(d, key_masked_tiles(d, keys, true, false)).block_n)) << d;
}

TEST(FlashConfig, InOrderGroupsWhereTheyWereMeasuredToWin) {
  constexpr int kSms = 132;  // H200
  // From 8192 query rows, with or without a key mask, whatever the keys and the tile count.
  EXPECT_EQ(choose_key_tiles(128, 32760, 32760, 40, kSms, false), KeyTiles::kInOrder);  // Wan 480p
  EXPECT_EQ(choose_key_tiles(128, 11440, 11440, 24, kSms, false), KeyTiles::kInOrder);  // Wan2.2-5B
  EXPECT_EQ(choose_key_tiles(128, 32760, 512, 40, kSms, false), KeyTiles::kInOrder);    // Wan cross, padded or not
  EXPECT_EQ(choose_key_tiles(128, 8192, 8300, 1, kSms, false), KeyTiles::kInOrder);
  EXPECT_EQ(choose_key_tiles(128, 8191, 8300, 1, kSms, false), KeyTiles::kLong);
  // Shorter rows: long keys and 192-row tiles that fill three waves (Flux: 24 x 24 = 576 tiles).
  EXPECT_EQ(choose_key_tiles(128, 4608, 4608, 24, kSms, false), KeyTiles::kInOrder);   // Flux, padded or not
  EXPECT_EQ(choose_key_tiles(128, 4096, 4096, 18, kSms, false), KeyTiles::kInOrder);   // 396 tiles: three waves
  EXPECT_EQ(choose_key_tiles(128, 4096, 4096, 16, kSms, false), KeyTiles::kShort);     // 352 tiles
  EXPECT_EQ(choose_key_tiles(128, 3072, 3072, 32, kSms, false), KeyTiles::kInOrder);
  EXPECT_EQ(choose_key_tiles(128, 3071, 3072, 64, kSms, false), KeyTiles::kShort);     // too few rows
  EXPECT_EQ(choose_key_tiles(128, 2048, 2048, 40, kSms, false), KeyTiles::kShort);     // too few rows
  EXPECT_EQ(choose_key_tiles(128, 4608, 2047, 48, kSms, false), KeyTiles::kShort);     // too few keys
  EXPECT_EQ(choose_key_tiles(128, 4608, 512, 24, kSms, false), KeyTiles::kShort);      // cross-attention, 512 keys
  // Causal calls: from 16384 rows only.
  EXPECT_EQ(choose_key_tiles(128, 16384, 16384, 24, kSms, true), KeyTiles::kInOrder);
  EXPECT_EQ(choose_key_tiles(128, 8192, 8192, 24, kSms, true), KeyTiles::kWide);
  EXPECT_EQ(choose_key_tiles(128, 4096, 4096, 24, kSms, true), KeyTiles::kShort);
  // The wave count follows the GPU: on a 66-SM part the 4k square with 16 heads fills 5 waves.
  EXPECT_EQ(choose_key_tiles(128, 4096, 4096, 16, 66, false), KeyTiles::kInOrder);
  // Other head sizes keep their key-count families.
  for (int d : {64, 96, 192, 256})
    EXPECT_EQ(choose_key_tiles(d, 32760, 32760, 40, kSms, false), key_tiles(d, 32760)) << d;
}

// Dense masks shared by the heads take the unmasked call's in-order tile at hd128 where it would;
// per-head masks and other shapes the 128 x 128 tile the block-sparse lists share; the A/B override
// forces either, and hd64 has one tile.
TEST(FlashConfig, SharedDenseMasksTakeTheInOrderTileWhereUnmaskedCallsWould) {
  constexpr int kSms = 132;
  const HopperTile in_order = hopper_tile(128, KeyTiles::kInOrder);
  EXPECT_EQ(in_order.block_m, 192);
  EXPECT_EQ(in_order.consumer_warpgroups, 3);
  EXPECT_EQ(dense_mask_tile(128, 4608, 4608, 24, kSms, false).block_m, 192);   // Flux
  EXPECT_EQ(dense_mask_tile(128, 32760, 32760, 40, kSms, false).block_m, 192); // Wan 480p
  EXPECT_EQ(dense_mask_tile(128, 4608, 4608, 24, kSms, true).block_m, 128);    // a mask per head
  EXPECT_EQ(dense_mask_tile(128, 2048, 2048, 40, kSms, false).block_m, 128);   // too few rows
  EXPECT_EQ(dense_mask_tile(128, 4096, 4096, 16, kSms, false).block_m, 128);   // under three waves
  EXPECT_EQ(dense_mask_tile(128, 300, 704, 8, kSms, false).block_m, 128);
  EXPECT_EQ(dense_mask_tile(128, 300, 704, 8, kSms, true, 1).block_m, 192);
  EXPECT_EQ(dense_mask_tile(128, 4608, 4608, 24, kSms, false, 0).block_m, 128);
  for (bool per_head : {false, true})
    for (int forced : {-1, 0, 1}) {
      const HopperTile t = dense_mask_tile(64, 32760, 32760, 40, kSms, per_head, forced);
      EXPECT_EQ(t.block_m, block_sparse_tile(64).block_m) << forced;
      EXPECT_EQ(t.block_n, block_sparse_tile(64).block_n) << forced;
      EXPECT_EQ(dense_mask_tile(128, 4608, 4608, 24, kSms, per_head, forced).block_n, 128) << forced;
    }
}

// The one-warpgroup walk's CTAs fit one SM as many times as they ask, and leave each thread the
// registers the walk needs without spilling (ptxas: 160 at hd128 and 127 at hd64 on 64 x 64 lists
// with Q's register chunks, 155 at hd64 on 128 x 128 lists). It runs every 64 x 64 list; of the
// 128 x 128 lists only hd64's. Q's register chunks are whole 64-column chunks of Q, only on 64-key
// blocks (the only wgmma generated with A from registers and B K-major).
TEST(FlashConfig, ListWalkFitsItsResidency) {
  for (int d : kBlockSparseHeadSizes) {
    for (int tile : {kBlockSparseSmallTile, kBlockSparseTile}) {
      const ListWalk walk = list_walk(d, tile);
      if (tile == kBlockSparseTile && d == 128) {
        EXPECT_EQ(walk.ctas_per_sm, 0) << "hd128 128 x 128 lists run on the flash kernel's tiles";
        continue;
      }
      ASSERT_GT(walk.ctas_per_sm, 0) << d << " " << tile;
      EXPECT_EQ(walk.block_n, tile);
      EXPECT_GE(walk.k_bufs, 1) << d;
      EXPECT_GE(walk.v_bufs, 1) << d;
      EXPECT_LE((list_walk_smem_bytes(d, walk) + kSmemReservedPerCta) * walk.ctas_per_sm, kHopperSmemPerSm)
          << d << " " << tile;
      EXPECT_LE(list_walk_smem_bytes(d, walk), kHopperSmemLimit) << d;
      const int regs_per_thread = 65536 / (128 * walk.ctas_per_sm) / 8 * 8;
      const int needed = tile == kBlockSparseTile ? 155 : d == 128 ? 160 : 127;
      EXPECT_GE(regs_per_thread, needed) << d << " " << tile;
      EXPECT_GE(walk.q_register_chunks, 0) << d;
      EXPECT_LE(walk.q_register_chunks, d / 64) << d;
      if (tile != kBlockSparseSmallTile) EXPECT_EQ(walk.q_register_chunks, 0) << d;
    }
  }
  EXPECT_EQ(list_walk(96, kBlockSparseSmallTile).ctas_per_sm, 0);
  EXPECT_EQ(list_walk(64, 32).ctas_per_sm, 0);
  // Q (64 rows), one K and two V blocks of 64 rows x 128 bytes per 64 columns, four mbarriers, the slack.
  EXPECT_EQ(list_walk_smem_bytes(128, ListWalk{1, 2, 3, 64}), 4 * 16384 + 32 + 1024);
  // hd64, 128-key blocks: Q 64 x 128 bytes, three blocks of 128 x 128 bytes.
  EXPECT_EQ(list_walk_smem_bytes(64, ListWalk{1, 2, 3, 128}), 8192 + 3 * 16384 + 32 + 1024);
}

TEST(FlashConfig, UnknownHeadSizeHasNoTile) {
  const HopperTile t = hopper_tile(80, KeyTiles::kShort);
  EXPECT_EQ(t.block_m, 0);
  EXPECT_EQ(t.block_n, 0);
}

TEST(FlashConfig, LongKeySetsSwitchHd128ToWiderTiles) {
  EXPECT_FALSE(is_long_kv(512));
  EXPECT_FALSE(is_long_kv(kLongKvThreshold));
  EXPECT_TRUE(is_long_kv(kLongKvThreshold + 1));
  EXPECT_GT(hopper_tile(128, KeyTiles::kLong).block_n, hopper_tile(128, KeyTiles::kShort).block_n);
  // A 512-token cross-attention splits into whole 128-key tiles.
  EXPECT_EQ(512 % hopper_tile(128, key_tiles(128, 512)).block_n, 0);
}

TEST(FlashConfig, Hd128TakesWideTilesWhereTheKeysFillThem) {
  EXPECT_EQ(key_tiles(128, 4608), KeyTiles::kWide);    // Flux: 24 tiles of 192 keys exactly
  EXPECT_EQ(key_tiles(128, 32760), KeyTiles::kWide);   // Wan 480p: 72 padding keys of 32832
  EXPECT_EQ(key_tiles(128, 75600), KeyTiles::kWide);   // Wan 720p
  EXPECT_EQ(key_tiles(128, 4096), KeyTiles::kShort);   // 22 tiles, the last a third full
  EXPECT_EQ(key_tiles(128, 512), KeyTiles::kShort);    // cross-attention: below the minimum
  EXPECT_EQ(key_tiles(128, 3840), KeyTiles::kShort);   // a multiple of 192, below the minimum
  EXPECT_EQ(key_tiles(128, 8300), KeyTiles::kLong);    // 44 tiles of 192 would pad 148 keys (1.8 %)
  EXPECT_EQ(key_tiles(96, 4608), KeyTiles::kShort);    // hd96 has no wide tiles
  EXPECT_EQ(key_tiles(96, 32760), KeyTiles::kLong);
  EXPECT_EQ(key_tiles(64, 4608), KeyTiles::kShort);
  EXPECT_EQ(hopper_tile(128, KeyTiles::kWide).block_n, 192);
  EXPECT_FALSE(hopper_tile(128, KeyTiles::kWide).staged_epilogue);  // no room next to 192-key stages
  EXPECT_FALSE(hopper_tile(128, KeyTiles::kWide).issue_in_turn);
  // The padding bound: at most 1.5 % of the keys.
  for (std::int64_t keys = kWideMinKeys; keys < 40000; keys += 37)
    if (key_tiles(128, keys) == KeyTiles::kWide) EXPECT_LE(200 * (ceil_div(keys, 192) * 192 - keys), 3 * keys) << keys;
}

TEST(FlashConfig, SharedMemoryCountsPaddedChunks) {
  // hd96 pads to two 64-column chunks: Q 128x128, two stages of K and V 128x128, bf16.
  const HopperTile t{128, 128, 2, 2, false};
  EXPECT_EQ(hopper_smem_bytes(t, 96), 128 * 128 * 2 + 4 * 128 * 128 * 2 + (2 + 8) * 8 + 1024);
  EXPECT_EQ(hopper_smem_bytes(t, 96), hopper_smem_bytes(t, 128));
}

TEST(FlashConfig, PersistentGridNeverExceedsTilesOrSms) {
  EXPECT_EQ(persistent_grid(10, 132), 10);
  EXPECT_EQ(persistent_grid(100000, 132), 132);
  EXPECT_EQ(persistent_grid(0, 132), 1);
  EXPECT_EQ(num_m_blocks(4608, hopper_tile(128, KeyTiles::kShort)), 36);
  EXPECT_EQ(num_m_blocks(4429, hopper_tile(64, KeyTiles::kShort)), 24);  // 192-row tiles at hd64
  EXPECT_EQ(num_m_blocks(4609, hopper_tile(128, KeyTiles::kShort)), 37);
  EXPECT_EQ(num_tiles(2, 24, 36), 2 * 24 * 36);
}

TEST(FlashConfig, TmaCoordinatesAre32Bit) {
  EXPECT_TRUE(fits_tma_coordinates(75600));
  EXPECT_FALSE(fits_tma_coordinates(0));
  EXPECT_FALSE(fits_tma_coordinates(std::int64_t{1} << 31));
}

// Walks every work item of a plan's tail as the kernel decodes it and checks that the pieces cover
// each tail tile's key blocks exactly once, that a tile's pieces are numbered 0 .. pieces - 1 and
// agree on the count, that no count exceeds the partial buffers' room, and that no run holds more
// than its share of the stream. Returns the longest run in blocks.
std::int64_t check_tail_cover(const TailSplit& plan, std::int64_t tiles, std::int64_t n_blocks) {
  const std::int64_t tail = tiles - plan.split_begin;
  EXPECT_EQ(plan.stream_blocks, tail * n_blocks);
  std::vector<int> covered(static_cast<std::size_t>(plan.stream_blocks), 0);
  std::vector<std::vector<int>> pieces(static_cast<std::size_t>(tail));
  std::vector<int> counts(static_cast<std::size_t>(tail), 0);
  std::int64_t longest = 0;
  for (std::int64_t item = plan.split_begin; item < plan.items; ++item) {
    const std::int64_t j = item - plan.split_begin;
    const std::int64_t run = j % plan.segments;
    const TailPiece tp = tail_piece<std::int64_t>(plan.stream_blocks, plan.segments, n_blocks, run, j / plan.segments);
    if (tp.tile < 0) continue;
    EXPECT_LT(tp.tile, tail);
    EXPECT_LT(tp.n_begin, tp.n_end);
    EXPECT_LE(tp.pieces, plan.max_pieces);
    for (int b = tp.n_begin; b < tp.n_end; ++b) ++covered[static_cast<std::size_t>(tp.tile * n_blocks + b)];
    pieces[static_cast<std::size_t>(tp.tile)].push_back(tp.piece);
    counts[static_cast<std::size_t>(tp.tile)] = tp.pieces;
  }
  for (std::int64_t run = 0; run < plan.segments; ++run) {
    std::int64_t blocks = 0;
    for (int k = 0; k < plan.segment_items + 1; ++k) {
      const TailPiece tp = tail_piece<std::int64_t>(plan.stream_blocks, plan.segments, n_blocks, run, k);
      if (tp.tile < 0) continue;
      EXPECT_LT(k, plan.segment_items) << "a run touches more tiles than its items";
      blocks += tp.n_end - tp.n_begin;
    }
    EXPECT_GE(blocks, 2);
    EXPECT_LE(blocks, ceil_div(plan.stream_blocks, plan.segments));
    longest = std::max(longest, blocks);
  }
  for (int c : covered) EXPECT_EQ(c, 1);
  for (std::size_t t = 0; t < pieces.size(); ++t) {
    std::sort(pieces[t].begin(), pieces[t].end());
    EXPECT_EQ(static_cast<int>(pieces[t].size()), counts[t]);
    for (std::size_t i = 0; i < pieces[t].size(); ++i) EXPECT_EQ(pieces[t][i], static_cast<int>(i));
  }
  return longest;
}

TEST(FlashConfig, TailSplitCutsOnlyTheLastPartialWave) {
  // SD3 at hd64: 576 tiles of 35 key blocks on 132 SMs leave 48 tiles in a fifth wave; their 1680
  // blocks are cut into one run of at most 13 blocks per SM.
  const TailSplit sd3 = plan_tail_split(576, 132, 35);
  EXPECT_EQ(sd3.split_begin, 4 * 132);
  EXPECT_EQ(sd3.segments, 132);
  EXPECT_EQ(sd3.items, 4 * 132 + 132 * sd3.segment_items);
  EXPECT_EQ(check_tail_cover(sd3, 576, 35), 13);
  // Flux at hd128: 864 tiles, 72 in the last wave, runs of at most 20 of their 36 blocks.
  const TailSplit flux = plan_tail_split(864, 132, 36);
  EXPECT_EQ(flux.split_begin, 6 * 132);
  EXPECT_EQ(check_tail_cover(flux, 864, 36), 20);
  EXPECT_LE(flux.max_pieces, kMaxTailSplits + 1);
}

TEST(FlashConfig, TailSplitKeepsWholeTilesWhereItCannotHelp) {
  const TailSplit full = plan_tail_split(3 * 132, 132, 40);  // whole waves
  EXPECT_EQ(full.segments, 0);
  EXPECT_EQ(full.items, 3 * 132);
  const TailSplit nearly_full = plan_tail_split(10240, 132, 4);  // 512-token cross-attention: 4 blocks
  EXPECT_EQ(nearly_full.segments, 0);
  const TailSplit short_rows = plan_tail_split(200, 132, 3);  // too few key blocks to cut
  EXPECT_EQ(short_rows.segments, 0);
  // A tail of 131 tiles on 132 SMs: runs of 40 blocks would not be shorter than whole tiles.
  EXPECT_EQ(plan_tail_split(131, 132, 40).segments, 0);
  EXPECT_EQ(plan_tail_split(0, 132, 40).items, 0);
}

TEST(FlashConfig, TailSplitOfFewTilesSpreadsThemOverTheSms) {
  // 16 tiles of 8 blocks on 132 SMs: 64 runs of two blocks, each tile in four pieces.
  const TailSplit few = plan_tail_split(16, 132, 8);
  EXPECT_EQ(few.split_begin, 0);
  EXPECT_EQ(few.segments, 64);
  EXPECT_EQ(check_tail_cover(few, 16, 8), 2);
  // Long rows: pieces per tile stay bounded however many SMs share few tiles.
  const TailSplit long_rows = plan_tail_split(134, 132, 256);
  EXPECT_EQ(long_rows.split_begin, 132);
  EXPECT_LE(long_rows.max_pieces, kMaxTailSplits + 2);
  check_tail_cover(long_rows, 134, 256);
  // Runs that do not divide the stream evenly, and runs longer than a tile.
  for (std::int64_t tiles : {133, 140, 190, 250, 263}) {
    for (std::int64_t n : {4, 5, 9, 37, 100}) {
      const TailSplit plan = plan_tail_split(tiles, 132, n);
      if (plan.segments > 0) check_tail_cover(plan, tiles, n);
    }
  }
  const TailSplit long_runs = plan_tail_split(250, 64, 9);  // 58 tiles of 9 blocks on 64 SMs
  if (long_runs.segments > 0) check_tail_cover(long_runs, 250, 9);
}

}  // namespace
}  // namespace diffattn::flash
