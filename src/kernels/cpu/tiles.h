#pragma once
// Tile sizes of the CPU kernel, as a plain function so they can be tested and tuned alone.

#include <cstdint>

namespace diffattn::cpu {

struct CpuTiles {
  int block_q = 128;  // query rows per work item: K/V tiles are packed once per block
  int block_k = 64;   // keys per tile: S tile and packed K/V stay in L2
};

// Packing a K/V tile costs about as much as a few dozen query rows of work, so query blocks are as
// large as the per-thread Q and O buffers allow (about 512 KiB together); they shrink when there
// are too few (batch, head) pairs or rows to keep every thread busy.
inline CpuTiles choose_cpu_tiles(std::int64_t batch_heads, std::int64_t seqlen_q, int threads,
                                 std::int64_t head_size, std::int64_t head_size_v) {
  CpuTiles tiles;
  const std::int64_t widths = head_size + head_size_v;
  tiles.block_q = widths <= 256 ? 512 : widths <= 512 ? 256 : 128;
  auto blocks = [&](int bq) { return batch_heads * ((seqlen_q + bq - 1) / bq); };
  while (tiles.block_q > 16 && blocks(tiles.block_q) < 4 * static_cast<std::int64_t>(threads)) tiles.block_q /= 2;
  return tiles;
}

}  // namespace diffattn::cpu
