// SAGE_ATTN's Hopper kernel shape rule (kernels/cuda/sage/sage_config.h), on the CPU.
#include "kernels/cuda/sage/sage_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cuda/sage/sage_quant_schedule.h"

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

// The measured rule: three in-order groups, except at hd64 up to 4096 query rows.
TEST(SageConfig, ThreeGroupsExceptShortHeadSize64Rows) {
  for (std::int64_t rows : {1, 512, 4096, 4429, 32760}) EXPECT_EQ(sage_consumer_groups(128, rows), 3) << rows;
  EXPECT_EQ(sage_consumer_groups(64, 1), 2);
  EXPECT_EQ(sage_consumer_groups(64, kSageHd64TwoGroupMaxRows), 2);
  EXPECT_EQ(sage_consumer_groups(64, kSageHd64TwoGroupMaxRows + 1), 3);
  EXPECT_EQ(sage_consumer_groups(64, 16384), 3);
}

// A last wave of fewer tiles than half the SMs runs as pieces, each CTA at most one; the pieces of
// a tile cover its key blocks once, in order, each at least kSageMinPieceBlocks long.
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

// The quantization launch's tickets: every item once, the Q items first, and every K or V item of a
// head after all of that head's statistics items (so a CTA only ever waits on CTAs that started
// before it), on random shapes and lags.
TEST(SageQuantSchedule, EveryItemOnceAndEveryWaitOnAnEarlierTicket) {
  std::mt19937 rng(std::random_device{}());
  const auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int round = 0; round < 300; ++round) {
    SageQuantSchedule s;
    s.q_heads = draw(0, 1) * draw(1, 6);
    s.q_blocks = draw(1, 9);
    s.heads = draw(1, 9);
    s.stat_items = draw(1, 7);
    s.k_items = draw(0, 1) * draw(1, 9);
    s.v_items = s.k_items == 0 ? draw(1, 5) : draw(0, 1) * draw(1, 5);
    s.lag = draw(1, s.heads);
    std::map<std::tuple<int, int, int>, std::int64_t> seen;  // (kind, head, index) -> ticket
    std::vector<std::int64_t> last_stats(s.heads, -1), first_kv(s.heads, s.total());
    std::int64_t last_q = -1, first_other = s.total();
    for (std::int64_t t = 0; t < s.total(); ++t) {
      const QuantItem it = quant_item(s, t);
      const auto key = std::make_tuple(static_cast<int>(it.kind), it.head, it.index);
      ASSERT_TRUE(seen.emplace(key, t).second) << "ticket " << t << " repeats an item";
      if (it.kind == QuantItemKind::kQ) {
        ASSERT_LT(it.head, s.q_heads);
        ASSERT_LT(it.index, s.q_blocks);
        last_q = t;
        continue;
      }
      first_other = std::min(first_other, t);
      ASSERT_GE(it.head, 0);
      ASSERT_LT(it.head, s.heads);
      const int limit = it.kind == QuantItemKind::kStats ? s.stat_items : it.kind == QuantItemKind::kK ? s.k_items : s.v_items;
      ASSERT_GE(it.index, 0);
      ASSERT_LT(it.index, limit);
      if (it.kind == QuantItemKind::kStats) last_stats[it.head] = t;
      else first_kv[it.head] = std::min(first_kv[it.head], t);
    }
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), s.total());
    EXPECT_LT(last_q, first_other);
    for (int h = 0; h < s.heads; ++h) EXPECT_LT(last_stats[h], first_kv[h]) << "head " << h << ", lag " << s.lag;
  }
}

// The lag fills the CTAs that run at once with items ahead of a head's K and V items, as far as
// the heads' keys and values fit the L2 window, never below 2 or above the heads.
TEST(SageQuantSchedule, LagFillsTheMachineWithinTheL2Window) {
  // FLUX.1 (24 heads of 4608 keys, hd128): 144 items and 2.25 MiB of K and V a head.
  const std::int64_t flux_bytes = 2LL * 4608 * 128 * 2;
  EXPECT_EQ(sage_quant_lag(24, 144, flux_bytes, 1056), 7);
  EXPECT_LE(7 * flux_bytes, kSageQuantL2Window);
  // A small machine needs fewer heads ahead.
  EXPECT_EQ(sage_quant_lag(24, 144, flux_bytes, 132), 2);
  // Wan2.1 480p heads (32760 keys) do not fit twice: still 2, so one head's statistics run while
  // the previous head's K and V items wait.
  EXPECT_EQ(sage_quant_lag(40, 1024, 2LL * 32760 * 128 * 2, 1056), 2);
  EXPECT_EQ(sage_quant_lag(1, 144, flux_bytes, 1056), 1);
  EXPECT_EQ(sage_quant_lag(3, 4, 1024, 100000), 3);
}

}  // namespace
}  // namespace diffattn::sage
