#pragma once
// Float64 block-sparse attention, straightforward loops: each query row attends to the keys of the
// key tiles its query tile lists (only their valid rows when the layout has tile_rows; and, as the
// kernel, to the kept keys of a key-padding mask and the causal prefix). Rows that see no key give
// zeros and LSE -inf; padding query rows are computed too (the caller ignores them).

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/sparse/block_sparse_layout.h"
#include "parity/oracle.h"

namespace diffattn::testing {

inline OracleOutput reference_block_sparse(const AttentionProblem& p, const BlockSparseLayout& layout) {
  OracleOutput o;
  o.batch = p.q.size(0);
  o.seq_q = p.q.size(1);
  o.heads = p.q.size(2);
  o.head_size_v = p.v.size(3);
  const std::int64_t skv = p.k.size(1), d = p.q.size(3), dv = o.head_size_v, group = o.heads / p.k.size(2);
  const double scale = p.softmax_scale(), neg_inf = -std::numeric_limits<double>::infinity();
  o.out.assign(static_cast<std::size_t>(o.batch * o.seq_q * o.heads * dv), 0.0);
  o.lse.assign(static_cast<std::size_t>(o.batch * o.heads * o.seq_q), neg_inf);
  for (std::int64_t b = 0; b < o.batch; ++b)
    for (std::int64_t h = 0; h < o.heads; ++h)
      for (std::int64_t i = 0; i < o.seq_q; ++i) {
        const std::int64_t r = layout.row(b, h, i / layout.q_tile);
        std::vector<bool> listed(static_cast<std::size_t>(skv), false);
        for (std::int32_t x = layout.offsets[r]; x < layout.offsets[r + 1]; ++x) {
          const std::int64_t j0 = std::int64_t{layout.indices[x]} * layout.k_tile;
          const std::int64_t rows = layout.tile_rows.empty() ? layout.k_tile : layout.tile_rows[layout.indices[x]];
          for (std::int64_t j = j0; j < std::min(skv, j0 + rows); ++j) listed[static_cast<std::size_t>(j)] = true;
        }
        std::vector<double> s(static_cast<std::size_t>(skv), neg_inf);
        double mx = neg_inf;
        for (std::int64_t j = 0; j < skv; ++j) {
          if (!listed[static_cast<std::size_t>(j)] || (p.causal && j > i) || !oracle_mask_keeps(p, b, h, i, j)) continue;
          double dot = 0.0;
          for (std::int64_t e = 0; e < d; ++e)
            dot += read_element(p.q, element_offset(p.q, {b, i, h, e})) *
                   read_element(p.k, element_offset(p.k, {b, j, h / group, e}));
          s[static_cast<std::size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        if (mx == neg_inf) continue;
        double sum = 0.0;
        for (double& x : s) sum += x = x == neg_inf ? 0.0 : std::exp(x - mx);
        o.lse_at(b, h, i) = mx + std::log(sum);
        for (std::int64_t e = 0; e < dv; ++e) {
          double value = 0.0;
          for (std::int64_t j = 0; j < skv; ++j)
            if (s[static_cast<std::size_t>(j)] != 0.0)
              value += s[static_cast<std::size_t>(j)] * read_element(p.v, element_offset(p.v, {b, j, h / group, e}));
          o.at(b, i, h, e) = value / sum;
        }
      }
  return o;
}

}  // namespace diffattn::testing
