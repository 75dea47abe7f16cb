#include "kernels/cpu/rainfusion_cpu.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/sage_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cpu/view_access.h"

namespace diffattn {
namespace {

// Tile means of a padded [B, padded, H, D] array over each video tile's valid rows: [B, video tiles, H, D].
std::vector<double> video_tile_means(const std::vector<float>& x, const RainTiles& tiles, std::int64_t batch,
                                     std::int64_t heads, std::int64_t dim) {
  return cpu::tile_means(x, tiles.valid, tiles.count(), kRainTileTokens, tiles.video_tiles, batch, heads * dim);
}

// `x` (values of a 16-bit type, held as floats) back in that type: exact.
std::vector<std::uint16_t> as_16_bit(const std::vector<float>& x, DType dtype) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = dtype == DType::kFloat16 ? cpu::float_to_half(x[i]) : cpu::float_to_bf16(x[i]);
  return out;
}

// The 8-bit fine pass (precision fp8 or mix): SAGE_ATTN's arithmetic over the lists, on the padded
// 16-bit sequence; fine_out receives its output as floats.
Status run_8_bit_fine_pass(const AttentionProblem& p, const RainFusionParams& params, const std::vector<float>& q,
                           const std::vector<float>& k, const std::vector<float>& v, const BlockSparseLayout& layout,
                           std::int64_t padded, std::vector<float>& fine_out) {
  const DType dtype = p.q.dtype;
  const std::int64_t batch = p.q.size(0), heads_q = p.q.size(2), heads_kv = p.k.size(2);
  const std::int64_t d = p.q.size(3), dv = p.v.size(3);
  std::vector<std::uint16_t> q16 = as_16_bit(q, dtype), k16 = as_16_bit(k, dtype), v16 = as_16_bit(v, dtype);
  std::vector<std::uint16_t> out16(fine_out.size(), 0);
  AttentionProblem fine;
  fine.q = TensorView::Contiguous(q16.data(), dtype, {batch, padded, heads_q, d});
  fine.k = TensorView::Contiguous(k16.data(), dtype, {batch, padded, heads_kv, d});
  fine.v = TensorView::Contiguous(v16.data(), dtype, {batch, padded, heads_kv, dv});
  fine.out = TensorView::Contiguous(out16.data(), dtype, {batch, padded, heads_q, dv});
  fine.scale = p.softmax_scale();
  const sage::PvMode pv = params.precision == RainPrecision::kFp8 ? sage::PvMode::kFp8 : sage::PvMode::kFp16;
  DIFFATTN_RETURN_IF_ERROR(sage::run_sage_block_sparse_cpu(fine, layout, pv));
  for (std::size_t i = 0; i < out16.size(); ++i)
    fine_out[i] = dtype == DType::kFloat16 ? cpu::half_to_float(out16[i]) : cpu::bf16_to_float(out16[i]);
  return Status::Ok();
}

// The valid rows of the padded fine output back into out, in the call's token order.
void scatter_fine_output(const AttentionProblem& p, const RainTiles& tiles, const std::vector<float>& fine_out,
                         std::int64_t padded) {
  const std::int64_t batch = p.q.size(0), tokens = p.q.size(1), heads_q = p.q.size(2), dv = p.v.size(3);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < tokens; ++i) {
      const std::int64_t slot = tiles.slot[static_cast<std::size_t>(i)];
      for (std::int64_t h = 0; h < heads_q; ++h) {
        const float* f = fine_out.data() + ((b * padded + slot) * heads_q + h) * dv;
        for (std::int64_t e = 0; e < dv; ++e) cpu::store_float(p.out, cpu::offset_of(p.out, b, i, h, e), f[e]);
      }
    }
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

// q . k in float64 over four independent partial sums: a single running sum is a chain of dependent
// additions, which held the sampled scores (every video key, per sampled query and head) to one
// addition per four cycles.
double dot_float64(const float* q, const float* k, std::int64_t d) {
  double part[4] = {0.0, 0.0, 0.0, 0.0};
  std::int64_t e = 0;
  for (; e + 4 <= d; e += 4)
    for (int u = 0; u < 4; ++u) part[u] += static_cast<double>(q[e + u]) * k[e + u];
  for (; e < d; ++e) part[0] += static_cast<double>(q[e]) * k[e];
  return (part[0] + part[1]) + (part[2] + part[3]);
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
      const double dot = dot_float64(q, k, d);
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
  const std::int64_t batch = p.q.size(0), heads_q = p.q.size(2), heads_kv = p.k.size(2);
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
  if (params.precision != RainPrecision::kBf16) {
    DIFFATTN_RETURN_IF_ERROR(run_8_bit_fine_pass(p, params, q, k, v, layout, padded, fine_out));
    scatter_fine_output(p, tiles, fine_out, padded);
    if (plan_out != nullptr) *plan_out = std::move(plan);
    return Status::Ok();
  }
  AttentionProblem fine;
  fine.q = TensorView::Contiguous(q.data(), DType::kFloat32, {batch, padded, heads_q, d});
  fine.k = TensorView::Contiguous(k.data(), DType::kFloat32, {batch, padded, heads_kv, d});
  fine.v = TensorView::Contiguous(v.data(), DType::kFloat32, {batch, padded, heads_kv, dv});
  fine.out = TensorView::Contiguous(fine_out.data(), DType::kFloat32, {batch, padded, heads_q, dv});
  fine.scale = p.softmax_scale();
  DIFFATTN_RETURN_IF_ERROR(run_block_sparse_cpu(fine, layout));
  scatter_fine_output(p, tiles, fine_out, padded);
  if (plan_out != nullptr) *plan_out = std::move(plan);
  return Status::Ok();
}

}  // namespace diffattn
