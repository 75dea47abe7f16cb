#include "kernels/sparse/block_sparse_layout.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <string>

namespace diffattn {

Status check_block_sparse_tiles(int q_tile, int k_tile) {
  for (auto [size, name] : {std::pair{q_tile, "query"}, std::pair{k_tile, "key"}})
    if (size < 1 || size > kMaxBlockSparseTile)
      return InvalidInput(std::string("block-sparse ") + name + " tile of " + std::to_string(size) +
                          " rows is outside 1.." + std::to_string(kMaxBlockSparseTile) +
                          "; choose a tile size in that range (64 or 128 are usual)");
  return Status::Ok();
}

Status check_block_sparse_layout(const BlockSparseLayout& layout, std::int64_t batch, std::int64_t heads,
                                 std::int64_t seqlen_q, std::int64_t seqlen_kv) {
  DIFFATTN_RETURN_IF_ERROR(check_block_sparse_tiles(layout.q_tile, layout.k_tile));
  const std::int64_t q_tiles = tile_count(seqlen_q, layout.q_tile), k_tiles = tile_count(seqlen_kv, layout.k_tile);
  if (layout.batch != batch || layout.heads != heads || layout.q_tiles != q_tiles || layout.k_tiles != k_tiles)
    return InvalidInput("block-sparse layout is for batch " + std::to_string(layout.batch) + ", " +
                        std::to_string(layout.heads) + " heads, " + std::to_string(layout.q_tiles) + " query tiles and " +
                        std::to_string(layout.k_tiles) + " key tiles, but the call has batch " + std::to_string(batch) +
                        ", " + std::to_string(heads) + " heads, " + std::to_string(q_tiles) + " query tiles and " +
                        std::to_string(k_tiles) + " key tiles; build the layout for this call's shapes");
  if (k_tiles > std::numeric_limits<std::int32_t>::max())
    return InvalidInput("block-sparse layout: " + std::to_string(k_tiles) + " key tiles do not fit int32 indices");
  const std::int64_t rows = batch * heads * q_tiles;
  if (static_cast<std::int64_t>(layout.offsets.size()) != rows + 1)
    return InvalidInput("block-sparse layout has " + std::to_string(layout.offsets.size()) +
                        " offsets; batch x heads x query tiles + 1 = " + std::to_string(rows + 1) + " are needed");
  if (layout.offsets[0] != 0 || layout.offsets.back() != static_cast<std::int64_t>(layout.indices.size()))
    return InvalidInput("block-sparse layout offsets must start at 0 and end at the number of indices (" +
                        std::to_string(layout.indices.size()) + "), got " + std::to_string(layout.offsets[0]) +
                        " and " + std::to_string(layout.offsets.back()));
  if (!layout.tile_rows.empty()) {
    if (layout.q_tile != layout.k_tile || seqlen_q != seqlen_kv ||
        static_cast<std::int64_t>(layout.tile_rows.size()) != q_tiles)
      return InvalidInput("block-sparse tile_rows describe padded self-attention tiles: they need q_tile = k_tile, "
                          "Sq = Skv and one entry per tile (" + std::to_string(q_tiles) + "), got " +
                          std::to_string(layout.tile_rows.size()) + " entries; or leave tile_rows empty");
    for (std::int64_t t = 0; t < q_tiles; ++t) {
      const std::int64_t most = std::min<std::int64_t>(layout.q_tile, seqlen_q - t * layout.q_tile);
      if (layout.tile_rows[t] < 1 || layout.tile_rows[t] > most)
        return InvalidInput("block-sparse tile_rows[" + std::to_string(t) + "] = " + std::to_string(layout.tile_rows[t]) +
                            " is outside 1.." + std::to_string(most) + " (the rows tile " + std::to_string(t) + " holds)");
    }
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t begin = layout.offsets[r], end = layout.offsets[r + 1];
    if (end < begin)
      return InvalidInput("block-sparse layout offsets decrease at row " + std::to_string(r) + " (" +
                          std::to_string(begin) + " then " + std::to_string(end) + "); offsets never decrease");
    for (std::int32_t i = begin; i < end; ++i) {
      const std::int32_t j = layout.indices[i];
      if (j < 0 || j >= k_tiles)
        return InvalidInput("block-sparse layout row " + std::to_string(r) + " lists key tile " + std::to_string(j) +
                            ", outside 0.." + std::to_string(k_tiles - 1));
      if (i > begin && j <= layout.indices[i - 1])
        return InvalidInput("block-sparse layout row " + std::to_string(r) + " lists key tile " + std::to_string(j) +
                            " after " + std::to_string(layout.indices[i - 1]) +
                            "; list each row's key tiles once, in ascending order");
    }
  }
  return Status::Ok();
}

BlockSparseLayout full_block_sparse_layout(std::int64_t batch, std::int64_t heads, std::int64_t seqlen_q,
                                           std::int64_t seqlen_kv, int q_tile, int k_tile) {
  BlockSparseLayout layout;
  layout.q_tile = q_tile;
  layout.k_tile = k_tile;
  layout.batch = batch;
  layout.heads = heads;
  layout.q_tiles = tile_count(seqlen_q, q_tile);
  layout.k_tiles = tile_count(seqlen_kv, k_tile);
  const std::int64_t rows = batch * heads * layout.q_tiles;
  layout.offsets.reserve(static_cast<std::size_t>(rows + 1));
  layout.indices.reserve(static_cast<std::size_t>(rows * layout.k_tiles));
  layout.offsets.push_back(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < layout.k_tiles; ++j) layout.indices.push_back(static_cast<std::int32_t>(j));
    layout.offsets.push_back(static_cast<std::int32_t>(layout.indices.size()));
  }
  return layout;
}

double block_sparse_density(const BlockSparseLayout& layout) {
  const double pairs = static_cast<double>(layout.batch * layout.heads * layout.q_tiles * layout.k_tiles);
  return pairs > 0 ? static_cast<double>(layout.indices.size()) / pairs : 0.0;
}

}  // namespace diffattn
