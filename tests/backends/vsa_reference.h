#pragma once
// Float64 FASTVIDEO_VSA, straightforward loops over tokens in raster order (no reordering, no
// padding): cube of a token from its (frame, row, column); cube means of q, k, v over the valid
// tokens; coarse softmax over cube means; per query cube the top-k key cubes (ties: lower index);
// fine attention of each query over the tokens of its cube's chosen cubes; out = fine + coarse *
// gate with a gate, else fine.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "parity/oracle.h"

namespace diffattn::testing {

struct VsaReference {
  OracleOutput out;
  std::int64_t cubes = 0;
  std::vector<std::vector<std::vector<std::int32_t>>> chosen;  // [b * heads + h][query cube] -> ascending key cubes
};

inline std::int64_t reference_cube_of(const VideoGeometry& g, std::int64_t token) {
  const std::int64_t x = token % g.width, y = token / g.width % g.height, t = token / (g.width * g.height);
  const std::int64_t gh = (g.height + 3) / 4, gw = (g.width + 3) / 4;
  return (t / 4 * gh + y / 4) * gw + x / 4;
}

inline VsaReference reference_vsa(const AttentionProblem& p, std::int64_t topk) {
  const VideoGeometry& g = *p.video;
  VsaReference ref;
  ref.cubes = (g.frames + 3) / 4 * ((g.height + 3) / 4) * ((g.width + 3) / 4);
  OracleOutput& o = ref.out;
  o.batch = p.q.size(0);
  o.seq_q = p.q.size(1);
  o.heads = p.q.size(2);
  o.head_size_v = p.v.size(3);
  const std::int64_t n = o.seq_q, d = p.q.size(3), dv = o.head_size_v, group = o.heads / p.k.size(2);
  const std::int64_t cubes = ref.cubes;
  const double scale = p.softmax_scale();
  o.out.assign(static_cast<std::size_t>(o.batch * n * o.heads * dv), 0.0);
  o.lse.assign(static_cast<std::size_t>(o.batch * o.heads * n), 0.0);
  ref.chosen.resize(static_cast<std::size_t>(o.batch * o.heads));
  auto q_at = [&](std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t e) {
    return read_element(p.q, element_offset(p.q, {b, i, h, e}));
  };
  auto k_at = [&](std::int64_t b, std::int64_t j, std::int64_t h, std::int64_t e) {
    return read_element(p.k, element_offset(p.k, {b, j, h / group, e}));
  };
  auto v_at = [&](std::int64_t b, std::int64_t j, std::int64_t h, std::int64_t e) {
    return read_element(p.v, element_offset(p.v, {b, j, h / group, e}));
  };
  for (std::int64_t b = 0; b < o.batch; ++b)
    for (std::int64_t h = 0; h < o.heads; ++h) {
      std::vector<double> qc(cubes * d, 0.0), kc(cubes * d, 0.0), vc(cubes * dv, 0.0), count(cubes, 0.0);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t c = reference_cube_of(g, i);
        count[c] += 1.0;
        for (std::int64_t e = 0; e < d; ++e) qc[c * d + e] += q_at(b, i, h, e), kc[c * d + e] += k_at(b, i, h, e);
        for (std::int64_t e = 0; e < dv; ++e) vc[c * dv + e] += v_at(b, i, h, e);
      }
      for (std::int64_t c = 0; c < cubes; ++c) {
        for (std::int64_t e = 0; e < d; ++e) qc[c * d + e] /= count[c], kc[c * d + e] /= count[c];
        for (std::int64_t e = 0; e < dv; ++e) vc[c * dv + e] /= count[c];
      }
      auto& chosen = ref.chosen[static_cast<std::size_t>(b * o.heads + h)];
      chosen.resize(static_cast<std::size_t>(cubes));
      std::vector<double> coarse(cubes * dv, 0.0);
      for (std::int64_t c = 0; c < cubes; ++c) {
        std::vector<double> s(cubes);
        for (std::int64_t j = 0; j < cubes; ++j) {
          double dot = 0.0;
          for (std::int64_t e = 0; e < d; ++e) dot += qc[c * d + e] * kc[j * d + e];
          s[j] = dot * scale;
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0.0;
        for (std::int64_t j = 0; j < cubes; ++j) sum += std::exp(s[j] - mx);
        for (std::int64_t j = 0; j < cubes; ++j)
          for (std::int64_t e = 0; e < dv; ++e) coarse[c * dv + e] += std::exp(s[j] - mx) / sum * vc[j * dv + e];
        std::vector<std::int32_t> order(cubes);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t z) { return s[a] > s[z]; });
        order.resize(static_cast<std::size_t>(topk));
        std::sort(order.begin(), order.end());
        chosen[static_cast<std::size_t>(c)] = order;
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t c = reference_cube_of(g, i);
        const auto& keep = chosen[static_cast<std::size_t>(c)];
        std::vector<double> s(n, 0.0);
        std::vector<bool> seen(n, false);
        double mx = -INFINITY;
        for (std::int64_t j = 0; j < n; ++j) {
          if (!std::binary_search(keep.begin(), keep.end(), static_cast<std::int32_t>(reference_cube_of(g, j)))) continue;
          double dot = 0.0;
          for (std::int64_t e = 0; e < d; ++e) dot += q_at(b, i, h, e) * k_at(b, j, h, e);
          s[j] = dot * scale;
          seen[j] = true;
          mx = std::max(mx, s[j]);
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j < n; ++j) sum += seen[j] ? std::exp(s[j] - mx) : 0.0;
        for (std::int64_t e = 0; e < dv; ++e) {
          double value = 0.0;
          for (std::int64_t j = 0; j < n; ++j)
            if (seen[j]) value += std::exp(s[j] - mx) / sum * v_at(b, j, h, e);
          if (p.gate) value += coarse[c * dv + e] * read_element(*p.gate, element_offset(*p.gate, {b, i, h, e}));
          o.at(b, i, h, e) = value;
        }
      }
    }
  return ref;
}

}  // namespace diffattn::testing
