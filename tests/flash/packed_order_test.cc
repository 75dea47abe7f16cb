// The order of a packed batch's tiles in a persistent Hopper launch (kernels/cuda/flash/packed_order.h):
// every tile is taken exactly once, and the work spreads evenly over the CTAs.

#include "kernels/cuda/flash/packed_order.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace diffattn::flash {
namespace {

std::vector<int> offsets(const std::vector<int>& lengths) {
  std::vector<int> cu(lengths.size() + 1, 0);
  for (std::size_t i = 0; i < lengths.size(); ++i) cu[i + 1] = cu[i] + lengths[i];
  return cu;
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Key blocks of CTA c's share: what each tile costs (its key blocks plus about one for its prologue
// and epilogue), over the slots c, c + grid, ... that the kernel's loops visit.
struct Spread {
  double busiest_over_mean;
  std::vector<std::vector<int>> seen;  // [b][h * m_blocks + m]: how often each tile was taken
};

// Every slot of the launch (the grid of the maxima: batch x heads x num_m_blocks), decoded as the
// kernel decodes it (kernels/cuda/flash/flash_fwd_hopper.cuh, decode_tile).
Spread ordered_spread(const std::vector<int>& q_len, const std::vector<int>& k_len, int heads, int block_m,
                      int block_n, int grid, bool causal = false) {
  const std::vector<int> cu_q = offsets(q_len), cu_k = offsets(k_len);
  const int batch = static_cast<int>(q_len.size());
  const int num_m = std::max(1, ceil_div(*std::max_element(q_len.begin(), q_len.end()), block_m));
  const std::vector<int> order = packed_order_host(cu_q, cu_k, heads, block_m);
  Spread s{0.0, {}};
  for (int b = 0; b < batch; ++b) s.seen.emplace_back(heads * ceil_div(q_len[b], block_m), 0);
  std::vector<std::int64_t> load(grid, 0);
  for (int slot = 0; slot < batch * heads * num_m; ++slot) {
    const int tile = packed_slot_tile(order.data(), cu_q.data(), batch, heads, block_m, num_m, causal, grid, slot);
    if (tile < 0) continue;
    int m = tile % num_m;
    const int bh = tile / num_m, h = bh % heads, b = bh / heads;
    if (causal) m = num_m - 1 - m;
    EXPECT_LT(m * block_m, q_len[b]) << "a slot names a tile past its sequence";
    ++s.seen[b][h * ceil_div(q_len[b], block_m) + m];
    load[slot % grid] += ceil_div(k_len[b], block_n) + 1;
  }
  std::int64_t total = 0;
  for (std::int64_t l : load) total += l;
  s.busiest_over_mean = total > 0 ? static_cast<double>(*std::max_element(load.begin(), load.end())) * grid / total : 1.0;
  return s;
}

// The same over the batch x heads x (longest sequence's tiles) grid, skipping tiles past a sequence.
double grid_spread(const std::vector<int>& q_len, const std::vector<int>& k_len, int heads, int block_m, int block_n,
                   int grid) {
  const int batch = static_cast<int>(q_len.size());
  const int m_blocks = ceil_div(*std::max_element(q_len.begin(), q_len.end()), block_m);
  std::vector<std::int64_t> load(grid, 0);
  for (int slot = 0; slot < batch * heads * m_blocks; ++slot) {
    const int b = slot / m_blocks / heads, m = slot % m_blocks;
    if (m * block_m >= q_len[b]) continue;
    load[slot % grid] += ceil_div(k_len[b], block_n) + 1;
  }
  std::int64_t total = 0;
  for (std::int64_t l : load) total += l;
  return static_cast<double>(*std::max_element(load.begin(), load.end())) * grid / total;
}

TEST(PackedOrder, EveryTileIsTakenOnce) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 40; ++trial) {
    const int batch = std::uniform_int_distribution<int>(2, 40)(rng);
    const int heads = std::uniform_int_distribution<int>(1, 24)(rng);
    const int grid = std::uniform_int_distribution<int>(1, 132)(rng);
    std::vector<int> q_len(batch), k_len(batch);
    for (int b = 0; b < batch; ++b) {
      // Empty sequences and equal key counts (rank ties) included.
      q_len[b] = std::uniform_int_distribution<int>(0, 3000)(rng);
      k_len[b] = std::uniform_int_distribution<int>(0, 4)(rng) == 0 ? 1000 : std::uniform_int_distribution<int>(1, 3000)(rng);
    }
    const Spread s = ordered_spread(q_len, k_len, heads, trial % 2 ? 128 : 192, 128, grid, trial % 3 == 0);
    for (int b = 0; b < batch; ++b)
      for (int seen : s.seen[b]) ASSERT_EQ(seen, 1) << "trial " << trial << " sequence " << b;
  }
}

TEST(PackedOrder, SequencesAreRankedByKeysMostFirstTiesByIndex) {
  const std::vector<int> cu_q = offsets({10, 20, 30, 40}), cu_k = offsets({500, 900, 500, 100});
  const std::vector<int> order = packed_order_host(cu_q, cu_k, 3, 16);
  EXPECT_EQ(std::vector<int>(order.begin(), order.begin() + 4), (std::vector<int>{1, 0, 2, 3}));
  // Tiles: 3 heads x {1, 2, 2, 3} query tiles of sequences 0-3, taken in rank order 1, 0, 2, 3.
  EXPECT_EQ(std::vector<int>(order.begin() + 4, order.end()), (std::vector<int>{0, 6, 9, 15, 24}));
}

TEST(PackedOrder, SlotsOfOneRoundAreItsItemsForwardsThenBackwards) {
  for (int slot = 0; slot < 5; ++slot) EXPECT_EQ(packed_item_of_slot(slot, 5, 12), slot);
  for (int slot = 5; slot < 10; ++slot) EXPECT_EQ(packed_item_of_slot(slot, 5, 12), 14 - slot);
  // The last, partial round of the slots is taken forwards, so that every item below n has a slot.
  for (int slot = 10; slot < 12; ++slot) EXPECT_EQ(packed_item_of_slot(slot, 5, 12), slot);
  for (int slot = 5; slot < 10; ++slot) EXPECT_EQ(packed_item_of_slot(slot, 5, 10), 14 - slot);
}

// Four Wan2.2-5B sequences (24 heads, the 192 x 128 tile, 132 SMs): taken in the grid's order the
// busiest CTA has 9 % more key blocks than the mean, in the packed order 0.3 %.
TEST(PackedOrder, SpreadsARaggedWan22BatchEvenly) {
  const std::vector<int> len = {11440, 8580, 5720, 2860};
  EXPECT_GT(grid_spread(len, len, 24, 192, 128, 132), 1.08);
  EXPECT_LT(ordered_spread(len, len, 24, 192, 128, 132).busiest_over_mean, 1.01);
  // In any order of the same sequences.
  const std::vector<int> mixed = {2860, 11440, 5720, 8580};
  EXPECT_LT(ordered_spread(mixed, mixed, 24, 192, 128, 132).busiest_over_mean, 1.01);
}

}  // namespace
}  // namespace diffattn::flash
