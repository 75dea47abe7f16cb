#pragma once
// Tile sizes of the CPU kernel, as a plain function so they can be tested and tuned alone.

#include <cstdint>

namespace diffattn::cpu {

struct CpuTiles {
  int block_q = 128;  // query rows per work item: K/V tiles are packed once per block
  int block_k = 64;   // keys per tile: S tile and packed K/V stay in L2
};

// Large query blocks amortise K/V packing; smaller ones keep every thread busy when there are
// few (batch, head) pairs or short sequences.
inline CpuTiles choose_cpu_tiles(std::int64_t batch_heads, std::int64_t seqlen_q, int threads) {
  CpuTiles tiles;
  auto blocks = [&](int bq) { return batch_heads * ((seqlen_q + bq - 1) / bq); };
  while (tiles.block_q > 16 && blocks(tiles.block_q) < 4 * static_cast<std::int64_t>(threads)) tiles.block_q /= 2;
  return tiles;
}

}  // namespace diffattn::cpu
