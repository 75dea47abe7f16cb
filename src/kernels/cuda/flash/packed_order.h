#pragma once
// The order in which a persistent Hopper launch of a packed (ragged) batch takes its query tiles.
// Plain arithmetic shared by the kernel, its launcher's ranking kernel and the CPU tests.
//
// The persistent grid gives CTA c its work items c, c + grid, c + 2 grid, ... (slots). Numbered over
// the batch x heads x (longest sequence's tiles) grid, a packed batch leaves holes where a sequence
// is shorter than the longest, which some CTAs skip and others do not, and the CTAs that draw more
// of the long sequences' tiles finish last: on four Wan2.2-5B sequences of 11440, 8580, 5720 and
// 2860 tokens (24 heads, 192-row tiles) the busiest of 132 CTAs has 9 % more key blocks than the
// mean. With a packed order the launcher ranks the sequences by key count (most first, ties by
// index) and numbers only their tiles, one after the other (head by head, query tiles innermost, as
// unpacked launches do); round k of the grid takes items [k grid, (k + 1) grid) forwards when k is
// even and backwards when it is odd, so every CTA draws long and short tiles alike (0.3 % over the
// mean on that batch). The slots stay those of the grid of the maxima (n = batch x heads x
// num_m_blocks, at least the item count), whose last round, when partial, is taken forwards, so
// that every item has a slot below n.
//
// The order: `batch` sequence indices by rank, then `batch + 1` prefix counts: start[j] is the first
// item of the sequence of rank j, start[batch] the item count. From it the launcher writes, per
// slot, the tile of the grid of the maxima that it takes, or -1 (FlashParams::packed_tiles), so
// that the kernel's decode only reads one int more.

#include <cstddef>
#include <vector>

#include "kernels/sparse/host_device.h"

namespace diffattn::flash {

// The item that slot `slot` (below n) of a grid of `grid` CTAs takes (slot = k * grid + c: CTA c's
// k-th).
DIFFATTN_HOST_DEVICE constexpr int packed_item_of_slot(int slot, int grid, int n) {
  const int round = slot / grid, pos = slot - round * grid;
  const bool backwards = (round & 1) != 0 && (round + 1) * grid <= n;
  return round * grid + (backwards ? grid - 1 - pos : pos);
}

// The rank j of the sequence that holds `item`: start[j] <= item < start[j + 1] (item below
// start[batch]; sequences without tiles have start[j] == start[j + 1] and are never returned).
DIFFATTN_HOST_DEVICE inline int packed_rank_of_item(const int* start, int batch, int item) {
  int lo = 0, hi = batch - 1;  // the answer is in [lo, hi]
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (start[mid] <= item) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Sequence b's rank: the sequences with more keys, and those with as many and a smaller index,
// come first. cu_seqlens_k: [batch + 1] offsets.
DIFFATTN_HOST_DEVICE inline int packed_rank(const int* cu_seqlens_k, int batch, int b) {
  const int keys = cu_seqlens_k[b + 1] - cu_seqlens_k[b];
  int rank = 0;
  for (int i = 0; i < batch; ++i) {
    const int other = cu_seqlens_k[i + 1] - cu_seqlens_k[i];
    rank += other > keys || (other == keys && i < b);
  }
  return rank;
}

// The query tiles of sequence b: heads x ceil(rows / block_m).
DIFFATTN_HOST_DEVICE inline int packed_tile_count(const int* cu_seqlens_q, int b, int heads, int block_m) {
  const int rows = cu_seqlens_q[b + 1] - cu_seqlens_q[b];
  return rows > 0 ? heads * ((rows + block_m - 1) / block_m) : 0;
}

// The tile that `item` names (item below start[batch]): sequence b, head h and query tile m of the
// sequence (before a causal launch reverses it). order: the workspace above.
struct PackedTile {
  int b, h, m;
  int m_blocks;  // the sequence's query tiles per head
};

DIFFATTN_HOST_DEVICE inline PackedTile packed_tile_of_item(const int* order, const int* cu_seqlens_q, int batch,
                                                           int block_m, int item) {
  const int* start = order + batch;
  const int j = packed_rank_of_item(start, batch, item);
  const int b = order[j], r = item - start[j];
  const int m_blocks = (cu_seqlens_q[b + 1] - cu_seqlens_q[b] + block_m - 1) / block_m;
  return {b, r / m_blocks, r % m_blocks, m_blocks};
}

// The tile of the grid of the maxima ((b heads_q + h) m_blocks + m, m counted from the last tile
// when causal, as the kernel's decode reverses it) that slot `slot` takes, or -1.
DIFFATTN_HOST_DEVICE inline int packed_slot_tile(const int* order, const int* cu_seqlens_q, int batch, int heads,
                                                 int block_m, int num_m_blocks, bool causal, int grid, int slot) {
  const int n = batch * heads * num_m_blocks;
  const int item = packed_item_of_slot(slot, grid, n);
  if (item >= order[2 * batch]) return -1;
  const PackedTile t = packed_tile_of_item(order, cu_seqlens_q, batch, block_m, item);
  if (t.m >= num_m_blocks) return -1;  // a sequence longer than the maxima (outside the contract)
  return (t.b * heads + t.h) * num_m_blocks + (causal ? num_m_blocks - 1 - t.m : t.m);
}

// The order on the host: the CPU oracle of the launcher's packed_order_kernel.
inline std::vector<int> packed_order_host(const std::vector<int>& cu_seqlens_q, const std::vector<int>& cu_seqlens_k,
                                          int heads, int block_m) {
  const int batch = static_cast<int>(cu_seqlens_q.size()) - 1;
  std::vector<int> order(2 * static_cast<std::size_t>(batch) + 1, 0);
  for (int b = 0; b < batch; ++b) {
    const int j = packed_rank(cu_seqlens_k.data(), batch, b);
    order[j] = b;
    order[batch + j + 1] = packed_tile_count(cu_seqlens_q.data(), b, heads, block_m);
  }
  for (int j = 1; j <= batch; ++j) order[batch + j] += order[batch + j - 1];
  return order;
}

}  // namespace diffattn::flash
