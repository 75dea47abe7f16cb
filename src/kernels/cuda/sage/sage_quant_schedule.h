#pragma once
// The order in which SAGE_ATTN's one quantization launch (sage_quant.cuh) takes its work items: a
// plain function of a ticket, tested on the CPU (tests/gpu/sage_config_test.cc).
//
// Every CTA takes the next ticket from a counter, so a CTA holding ticket t knows that every
// smaller ticket is held by a CTA that has started. The items of one (batch, kv head): its
// statistics chunks (K's channel sums, V's channel maxima; they wait on nothing, and the last one
// to finish turns them into the head's means), then its K key groups and V key blocks, which wait
// until the means are ready. Every K or V item of a head comes after all the head's statistics
// items, so the waits end. The Q row blocks wait on nothing and come first. The statistics of head
// h + lag come between the K and V items of heads h - 1 and h: by the time a head's K and V items
// start, its statistics are done, and its keys and values are read a second time from L2 while
// `lag` heads' worth of them still fit there.

#include <algorithm>
#include <cstdint>

namespace diffattn::sage {

enum class QuantItemKind { kQ, kStats, kK, kV };

struct QuantItem {
  QuantItemKind kind = QuantItemKind::kQ;
  int head = 0;   // kQ: batch * Hq + query head; else batch * Hkv + kv head
  int index = 0;  // the row block, statistics chunk, K group or V block within the head
};

struct SageQuantSchedule {
  int q_heads = 0, q_blocks = 0;  // Q: B * Hq heads of q_blocks row blocks (none in QkMode::k16)
  int heads = 0;                  // B * Hkv
  int stat_items = 0;             // statistics chunks per kv head
  int k_items = 0, v_items = 0;   // K key groups and V key blocks per kv head
  int lag = 1;                    // 1 <= lag <= heads
  // [1 + 2 * heads], zeroed before the launch: the ticket counter, then per kv head the statistics
  // items finished, then whether its means are ready.
  int* counters = nullptr;

  constexpr std::int64_t total() const {
    return std::int64_t{q_heads} * q_blocks + std::int64_t{heads} * (stat_items + k_items + v_items);
  }
};

// The item of `ticket` (0 <= ticket < s.total()).
constexpr QuantItem quant_item(const SageQuantSchedule& s, std::int64_t ticket) {
  const std::int64_t q_items = std::int64_t{s.q_heads} * s.q_blocks;
  if (ticket < q_items) return {QuantItemKind::kQ, static_cast<int>(ticket / s.q_blocks), static_cast<int>(ticket % s.q_blocks)};
  std::int64_t t = ticket - q_items;
  const std::int64_t stats = s.stat_items, kv = s.k_items + s.v_items, lag = s.lag;
  const auto k_or_v = [&](std::int64_t head, std::int64_t r) {
    return r < s.k_items ? QuantItem{QuantItemKind::kK, static_cast<int>(head), static_cast<int>(r)}
                         : QuantItem{QuantItemKind::kV, static_cast<int>(head), static_cast<int>(r - s.k_items)};
  };
  // The statistics of the first `lag` heads.
  if (t < lag * stats) return {QuantItemKind::kStats, static_cast<int>(t / stats), static_cast<int>(t % stats)};
  t -= lag * stats;
  // Then per head h < heads - lag: its K and V items, then the statistics of head h + lag.
  const std::int64_t step = kv + stats, middle = s.heads - lag;
  if (t < middle * step) {
    const std::int64_t h = t / step, r = t % step;
    if (r < kv) return k_or_v(h, r);
    return {QuantItemKind::kStats, static_cast<int>(h + lag), static_cast<int>(r - kv)};
  }
  // Then the K and V items of the last `lag` heads.
  t -= middle * step;
  return k_or_v(middle + t / kv, t % kv);
}

// L2 that the second read of the keys and values may count on: a third of an H100's or H200's
// 50 MB, the rest going to the Q pass and the quantized copies written meanwhile.
inline constexpr std::int64_t kSageQuantL2Window = std::int64_t{16} << 20;

// The lag: enough heads ahead that a head's statistics are finished when its K and V items start
// (the items of `lag` heads at least fill the CTAs that run at once), as long as those heads' keys
// and values fit the L2 window; at least 2 (while one head's statistics finish, the next head's run).
constexpr int sage_quant_lag(int heads, int items_per_head, std::int64_t kv_bytes_per_head, int concurrent_ctas) {
  if (heads <= 1) return 1;
  const std::int64_t fill = (std::int64_t{concurrent_ctas} + items_per_head - 1) / std::max(items_per_head, 1);
  const std::int64_t fit = kSageQuantL2Window / std::max<std::int64_t>(kv_bytes_per_head, 1);
  return static_cast<int>(std::clamp<std::int64_t>(std::min(fill, fit), 2, heads));
}

}  // namespace diffattn::sage
