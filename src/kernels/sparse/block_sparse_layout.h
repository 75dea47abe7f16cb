#pragma once
// Block-sparse attention as index lists, shared by the sparse backends' kernels: for each (batch,
// query head, query tile) the key tiles it attends to, in CSR form. Query tile t holds query rows
// [t * q_tile, (t + 1) * q_tile) and key tile j keys [j * k_tile, (j + 1) * k_tile), the last of
// each clipped to the sequence. Every key outside the listed tiles is dropped; with every tile
// listed the result is dense attention.

#include <cstdint>
#include <vector>

#include "diffattn/status.h"

namespace diffattn {

// Tiles beyond this would make the CPU kernel's per-thread buffers (Q, O and S tiles) outgrow L2.
inline constexpr int kMaxBlockSparseTile = 512;

struct BlockSparseLayout {
  int q_tile = 64;  // query rows per tile
  int k_tile = 64;  // keys per tile
  std::int64_t batch = 0, heads = 0;      // heads: query heads
  std::int64_t q_tiles = 0, k_tiles = 0;  // tiles per sequence
  // The key tiles of row r = (b * heads + h) * q_tiles + t are indices[offsets[r] .. offsets[r + 1]),
  // strictly ascending (the kernel's online softmax visits them in this order).
  std::vector<std::int32_t> offsets;  // batch * heads * q_tiles + 1 entries, offsets[0] = 0
  std::vector<std::int32_t> indices;
  // Optional, for self-attention over padded tiles (q_tile = k_tile, Sq = Skv; FastVideo's variable
  // block sizes): the valid leading rows of each tile. Rows past them are padding: never keys, and
  // not computed as queries (their out and lse rows are left as they were). Empty: every row.
  std::vector<std::int32_t> tile_rows;

  std::int64_t row(std::int64_t b, std::int64_t h, std::int64_t t) const { return (b * heads + h) * q_tiles + t; }
};

// Tiles of `tile` rows that cover `length` rows (the last may be partial).
inline std::int64_t tile_count(std::int64_t length, std::int64_t tile) { return (length + tile - 1) / tile; }

// Tile sizes the kernels take: 1..kMaxBlockSparseTile rows each.
Status check_block_sparse_tiles(int q_tile, int k_tile);

// Whether `layout` describes attention of `batch` x `heads` query heads over sequences of
// `seqlen_q` queries and `seqlen_kv` keys: tile sizes, tile counts, offsets, sorted, in-range,
// distinct indices and the tile rows. Messages name the first wrong entry.
Status check_block_sparse_layout(const BlockSparseLayout& layout, std::int64_t batch, std::int64_t heads,
                                 std::int64_t seqlen_q, std::int64_t seqlen_kv);

// Every key tile for every query tile: dense attention in block-sparse form.
BlockSparseLayout full_block_sparse_layout(std::int64_t batch, std::int64_t heads, std::int64_t seqlen_q,
                                           std::int64_t seqlen_kv, int q_tile, int k_tile);

// Listed (query tile, key tile) pairs over all pairs: 1 for dense, 0 when nothing is listed.
double block_sparse_density(const BlockSparseLayout& layout);

}  // namespace diffattn
