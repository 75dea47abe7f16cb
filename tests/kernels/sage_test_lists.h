#pragma once
// Random block-sparse lists for the SAGE_ATTN CPU tests (sage_cpu_test.cc, sage_tile_test.cc).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/sage/sage_quant.h"
#include "kernels/sparse/block_sparse_layout.h"
#include "parity/cases.h"

namespace diffattn::testing {

// Block-sparse lists of 128 x 128 tiles: each (batch, head, query tile) lists round(density x key
// tiles) random distinct key tiles; every `empty_every`-th row lists none (0: none is empty).
inline BlockSparseLayout random_sage_lists(const ParityCase& c, double density, int empty_every, std::mt19937_64& rng) {
  BlockSparseLayout l;
  l.q_tile = l.k_tile = sage::kKvBlock;
  l.batch = c.batch, l.heads = c.heads_q;
  l.q_tiles = tile_count(c.seq_q, l.q_tile), l.k_tiles = tile_count(c.seq_kv, l.k_tile);
  const auto keep = std::max<std::int64_t>(1, std::llround(density * static_cast<double>(l.k_tiles)));
  std::vector<std::int32_t> all(static_cast<std::size_t>(l.k_tiles));
  l.offsets.push_back(0);
  for (std::int64_t r = 0; r < l.batch * l.heads * l.q_tiles; ++r) {
    if (empty_every == 0 || r % empty_every != empty_every - 1) {
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      std::sort(all.begin(), all.begin() + keep);
      l.indices.insert(l.indices.end(), all.begin(), all.begin() + keep);
    }
    l.offsets.push_back(static_cast<std::int32_t>(l.indices.size()));
  }
  return l;
}

}  // namespace diffattn::testing
