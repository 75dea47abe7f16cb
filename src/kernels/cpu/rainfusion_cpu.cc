#include "kernels/cpu/rainfusion_cpu.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cpu/view_access.h"

namespace diffattn {
namespace {

// Tile means of a padded [B, padded, H, D] array over each video tile's valid rows: [B, video tiles, H, D].
std::vector<double> video_tile_means(const std::vector<float>& x, const RainTiles& tiles, std::int64_t batch,
                                     std::int64_t heads, std::int64_t dim) {
  return cpu::tile_means(x, tiles.valid, tiles.count(), kRainTileTokens, tiles.video_tiles, batch, heads * dim);
}

struct Inputs {
  const RainTiles& tiles;
  const std::vector<float>& q;  // padded tile order
  const std::vector<float>& k;
  const std::vector<double>& q_means;
  const std::vector<double>& k_means;
  std::int64_t batch, heads_q, heads_kv, d;
  double scale;
};

// Block scores of video query tiles [first, first + rows) of one head against every video key tile: [rows, V].
void block_scores(const Inputs& in, std::int64_t b, std::int64_t h, std::int64_t first, std::int64_t rows,
                  std::vector<double>& scores) {
  const std::int64_t video = in.tiles.video_tiles, hk = h / (in.heads_q / in.heads_kv), d = in.d;
  scores.resize(static_cast<std::size_t>(rows * video));
  for (std::int64_t i = first; i < first + rows; ++i) {
    const double* q = in.q_means.data() + ((b * video + i) * in.heads_q + h) * d;
    for (std::int64_t j = 0; j < video; ++j) {
      const double* k = in.k_means.data() + ((b * video + j) * in.heads_kv + hk) * d;
      double dot = 0.0;
      for (std::int64_t e = 0; e < d; ++e) dot += q[e] * k[e];
      scores[static_cast<std::size_t>((i - first) * video + j)] = dot * in.scale;
    }
  }
}

// The attention mass of one sampled query (padded slot `slot`) on each video key tile, from its
// exact scores over every video key.
void sampled_tile_mass(const Inputs& in, std::int64_t b, std::int64_t h, std::int64_t slot,
                       std::vector<double>& logits, std::vector<double>& mass) {
  const RainTiles& t = in.tiles;
  const std::int64_t count = t.count(), hk = h / (in.heads_q / in.heads_kv), d = in.d;
  const float* q = in.q.data() + ((b * count * kRainTileTokens + slot) * in.heads_q + h) * d;
  logits.clear();
  double best = -INFINITY;
  for (std::int64_t j = 0; j < t.video_tiles; ++j)
    for (std::int32_t r = 0; r < t.valid[static_cast<std::size_t>(j)]; ++r) {
      const float* k = in.k.data() + ((b * count * kRainTileTokens + j * kRainTileTokens + r) * in.heads_kv + hk) * d;
      double dot = 0.0;
      for (std::int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * k[e];
      logits.push_back(dot * in.scale);
      best = std::max(best, dot * in.scale);
    }
  mass.assign(static_cast<std::size_t>(t.video_tiles), 0.0);
  double sum = 0.0;
  std::size_t n = 0;
  for (std::int64_t j = 0; j < t.video_tiles; ++j)
    for (std::int32_t r = 0; r < t.valid[static_cast<std::size_t>(j)]; ++r, ++n) {
      const double p = std::exp(logits[n] - best);
      mass[static_cast<std::size_t>(j)] += p;
      sum += p;
    }
  for (double& m : mass) m /= sum;
}

}  // namespace

Status run_rainfusion_cpu(const AttentionProblem& p, const RainFusionParams& params, RainFusionPlan* plan_out) {
  DIFFATTN_RETURN_IF_ERROR(check_rainfusion_call(p, params));
  const VideoGeometry& g = *p.video;
  RainFusionPlan plan;
  plan.tiles = tile_sequence_for_rainfusion(g);
  const RainTiles& tiles = plan.tiles;
  const std::int64_t batch = p.q.size(0), tokens = p.q.size(1), heads_q = p.q.size(2), heads_kv = p.k.size(2);
  const std::int64_t d = p.q.size(3), dv = p.v.size(3), padded = tiles.padded_length();
  std::vector<float> q = cpu::gather_into_slots(p.q, tiles.slot, padded);
  std::vector<float> k = cpu::gather_into_slots(p.k, tiles.slot, padded);
  std::vector<float> v = cpu::gather_into_slots(p.v, tiles.slot, padded);
  const std::vector<double> q_means = video_tile_means(q, tiles, batch, heads_q, d);
  const std::vector<double> k_means = video_tile_means(k, tiles, batch, heads_kv, d);
  const Inputs in{tiles, q, k, q_means, k_means, batch, heads_q, heads_kv, d, p.softmax_scale()};

  RainScoreSource<double> source;
  source.block_scores = [&in, heads_q](std::int64_t bh, std::int64_t first, std::int64_t rows,
                                       std::vector<double>& buffer) {
    block_scores(in, bh / heads_q, bh % heads_q, first, rows, buffer);
    return static_cast<const double*>(buffer.data());
  };
  source.sampled_mass = [&in, heads_q](std::int64_t bh, std::int64_t, std::int64_t slot, std::vector<double>& mass) {
    thread_local std::vector<double> logits;
    sampled_tile_mass(in, bh / heads_q, bh % heads_q, slot, logits, mass);
  };
  DIFFATTN_RETURN_IF_ERROR(build_rainfusion_plan(g, params, batch, heads_q, source, plan));
  const BlockSparseLayout& layout = plan.layout;

  // The fine pass on the padded sequence; it refuses inputs whose scores could pass float32's
  // range before out is touched.
  std::vector<float> fine_out(static_cast<std::size_t>(batch * padded * heads_q * dv));
  AttentionProblem fine;
  fine.q = TensorView::Contiguous(q.data(), DType::kFloat32, {batch, padded, heads_q, d});
  fine.k = TensorView::Contiguous(k.data(), DType::kFloat32, {batch, padded, heads_kv, d});
  fine.v = TensorView::Contiguous(v.data(), DType::kFloat32, {batch, padded, heads_kv, dv});
  fine.out = TensorView::Contiguous(fine_out.data(), DType::kFloat32, {batch, padded, heads_q, dv});
  fine.scale = p.softmax_scale();
  DIFFATTN_RETURN_IF_ERROR(run_block_sparse_cpu(fine, layout));

  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < tokens; ++i) {
      const std::int64_t slot = tiles.slot[static_cast<std::size_t>(i)];
      for (std::int64_t h = 0; h < heads_q; ++h) {
        const float* f = fine_out.data() + ((b * padded + slot) * heads_q + h) * dv;
        for (std::int64_t e = 0; e < dv; ++e) cpu::store_float(p.out, cpu::offset_of(p.out, b, i, h, e), f[e]);
      }
    }
  if (plan_out != nullptr) *plan_out = std::move(plan);
  return Status::Ok();
}

}  // namespace diffattn
