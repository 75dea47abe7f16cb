#include "kernels/cpu/vsa_cpu.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cpu/view_access.h"
#include "kernels/sparse/vsa_cubes.h"

namespace diffattn {
namespace {

using cpu::gather_into_slots;
using cpu::load_float;
using cpu::offset_of;
using cpu::store_float;

// Means over each cube's valid tokens: [B, cubes, H, D] in float64.
std::vector<double> pool_cubes(const std::vector<float>& x, const VsaCubes& cubes, std::int64_t batch,
                               std::int64_t heads, std::int64_t dim) {
  return cpu::tile_means(x, cubes.valid, cubes.count(), kVsaCubeTokens, cubes.count(), batch, heads * dim);
}

struct CoarseBranch {
  std::vector<double> out;  // [B, cubes, Hq, Dv]
  BlockSparseLayout layout;
};

// Attention over cube means and, from the same scores, each query cube's top-k key cubes.
CoarseBranch run_coarse_branch(const std::vector<double>& qc, const std::vector<double>& kc,
                               const std::vector<double>& vc, std::int64_t batch, std::int64_t count,
                               std::int64_t heads_q, std::int64_t heads_kv, std::int64_t d, std::int64_t dv,
                               double scale, std::int64_t topk) {
  CoarseBranch coarse;
  coarse.out.assign(static_cast<std::size_t>(batch * count * heads_q * dv), 0.0);
  BlockSparseLayout& layout = coarse.layout;
  layout.q_tile = layout.k_tile = static_cast<int>(kVsaCubeTokens);
  layout.batch = batch;
  layout.heads = heads_q;
  layout.q_tiles = layout.k_tiles = count;
  const std::int64_t rows = batch * heads_q * count;
  layout.offsets.resize(static_cast<std::size_t>(rows + 1));
  for (std::int64_t r = 0; r <= rows; ++r) layout.offsets[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r * topk);
  layout.indices.resize(static_cast<std::size_t>(rows * topk));
  const std::int64_t group = heads_q / heads_kv;
#pragma omp parallel
  {
    std::vector<double> scores(static_cast<std::size_t>(count));
    std::vector<std::int32_t> order(static_cast<std::size_t>(count));
#pragma omp for schedule(dynamic, 8)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t c = r % count, h = (r / count) % heads_q, b = r / (count * heads_q);
      const std::int64_t hk = h / group;
      const double* q = qc.data() + ((b * count + c) * heads_q + h) * d;
      double best = -INFINITY;
      for (std::int64_t j = 0; j < count; ++j) {
        const double* k = kc.data() + ((b * count + j) * heads_kv + hk) * d;
        double dot = 0.0;
        for (std::int64_t e = 0; e < d; ++e) dot += q[e] * k[e];
        scores[static_cast<std::size_t>(j)] = dot * scale;
        best = std::max(best, dot * scale);
      }
      double* o = coarse.out.data() + ((b * count + c) * heads_q + h) * dv;
      double sum = 0.0;
      for (std::int64_t j = 0; j < count; ++j) {
        const double p = std::exp(scores[static_cast<std::size_t>(j)] - best);
        sum += p;
        const double* v = vc.data() + ((b * count + j) * heads_kv + hk) * dv;
        for (std::int64_t e = 0; e < dv; ++e) o[e] += p * v[e];
      }
      for (std::int64_t e = 0; e < dv; ++e) o[e] /= sum;
      // The softmax is monotone, so the top-k of the scores is the top-k of the coarse weights.
      std::iota(order.begin(), order.end(), 0);
      auto higher = [&](std::int32_t a, std::int32_t z) {
        const double sa = scores[static_cast<std::size_t>(a)], sz = scores[static_cast<std::size_t>(z)];
        return sa > sz || (sa == sz && a < z);
      };
      std::nth_element(order.begin(), order.begin() + (topk - 1), order.end(), higher);
      std::sort(order.begin(), order.begin() + topk);
      std::copy(order.begin(), order.begin() + topk, layout.indices.begin() + r * topk);
    }
  }
  return coarse;
}

}  // namespace

Status run_fastvideo_vsa_cpu(const AttentionProblem& p, std::int64_t topk, BlockSparseLayout* selected) {
  DIFFATTN_RETURN_IF_ERROR(check_vsa_problem(p, topk));

  const VsaCubes cubes = tile_video_into_cubes(*p.video);
  const std::int64_t batch = p.q.size(0), tokens = p.q.size(1), heads_q = p.q.size(2), heads_kv = p.k.size(2);
  const std::int64_t d = p.q.size(3), dv = p.v.size(3), count = cubes.count(), padded = cubes.padded_length();
  std::vector<float> q = gather_into_slots(p.q, cubes.slot, padded);
  std::vector<float> k = gather_into_slots(p.k, cubes.slot, padded);
  std::vector<float> v = gather_into_slots(p.v, cubes.slot, padded);

  CoarseBranch coarse = run_coarse_branch(pool_cubes(q, cubes, batch, heads_q, d), pool_cubes(k, cubes, batch, heads_kv, d),
                                          pool_cubes(v, cubes, batch, heads_kv, dv), batch, count, heads_q, heads_kv, d,
                                          dv, p.softmax_scale(), topk);

  // The fine branch on the padded sequence: the layout's tile rows (each cube's valid tokens come
  // first) keep padding slots out as keys and skip them as queries. It refuses inputs whose scores
  // could pass float32's range before out is touched.
  coarse.layout.tile_rows = cubes.valid;
  std::vector<float> fine_out(static_cast<std::size_t>(batch * padded * heads_q * dv));
  AttentionProblem fine;
  fine.q = TensorView::Contiguous(q.data(), DType::kFloat32, {batch, padded, heads_q, d});
  fine.k = TensorView::Contiguous(k.data(), DType::kFloat32, {batch, padded, heads_kv, d});
  fine.v = TensorView::Contiguous(v.data(), DType::kFloat32, {batch, padded, heads_kv, dv});
  fine.out = TensorView::Contiguous(fine_out.data(), DType::kFloat32, {batch, padded, heads_q, dv});
  fine.scale = p.softmax_scale();
  DIFFATTN_RETURN_IF_ERROR(run_block_sparse_cpu(fine, coarse.layout));

  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < tokens; ++i) {
      const std::int64_t slot = cubes.slot[static_cast<std::size_t>(i)], cube = slot / kVsaCubeTokens;
      for (std::int64_t h = 0; h < heads_q; ++h) {
        const float* f = fine_out.data() + ((b * padded + slot) * heads_q + h) * dv;
        const double* c = coarse.out.data() + ((b * count + cube) * heads_q + h) * dv;
        for (std::int64_t e = 0; e < dv; ++e) {
          double value = f[e];
          if (p.gate) value += c[e] * static_cast<double>(load_float(*p.gate, offset_of(*p.gate, b, i, h, e)));
          store_float(p.out, offset_of(p.out, b, i, h, e), static_cast<float>(value));
        }
      }
    }
  if (selected != nullptr) *selected = std::move(coarse.layout);
  return Status::Ok();
}

}  // namespace diffattn
