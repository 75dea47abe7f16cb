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

// Block scores of every video query tile against every video key tile of one head: [V, V].
void block_scores(const Inputs& in, std::int64_t b, std::int64_t h, std::vector<double>& scores) {
  const std::int64_t video = in.tiles.video_tiles, hk = h / (in.heads_q / in.heads_kv), d = in.d;
  scores.resize(static_cast<std::size_t>(video * video));
  for (std::int64_t i = 0; i < video; ++i) {
    const double* q = in.q_means.data() + ((b * video + i) * in.heads_q + h) * d;
    for (std::int64_t j = 0; j < video; ++j) {
      const double* k = in.k_means.data() + ((b * video + j) * in.heads_kv + hk) * d;
      double dot = 0.0;
      for (std::int64_t e = 0; e < d; ++e) dot += q[e] * k[e];
      scores[static_cast<std::size_t>(i * video + j)] = dot * in.scale;
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

struct HeadChoice {
  RainPattern pattern = RainPattern::kTextural;
  double captured[3] = {0.0, 0.0, 0.0};
};

// Samples queries spread evenly over the video's tokens and keeps the pattern whose masks hold the
// most of their attention.
HeadChoice recognise_head(const Inputs& in, const VideoGeometry& g, std::int64_t b, std::int64_t h,
                          const std::vector<double>& scores, std::int64_t keep, int sampled) {
  const RainTiles& t = in.tiles;
  const std::int64_t video_tokens = g.tokens(), samples = std::min<std::int64_t>(sampled, video_tokens);
  std::vector<double> logits, mass;
  std::vector<std::int32_t> scratch, chosen;
  HeadChoice choice;
  for (std::int64_t s = 0; s < samples; ++s) {
    const std::int64_t token = g.text_before + (2 * s + 1) * video_tokens / (2 * samples);
    const std::int64_t slot = t.slot[static_cast<std::size_t>(token)], tile = slot / kRainTileTokens;
    sampled_tile_mass(in, b, h, slot, logits, mass);
    for (std::size_t p = 0; p < 3; ++p) {
      rain_select_tiles(t, kRainPatterns[p], tile, scores.data() + tile * t.video_tiles, keep, scratch, chosen);
      double held = 0.0;
      for (std::int32_t j : chosen) held += mass[static_cast<std::size_t>(j)];
      choice.captured[p] += held / static_cast<double>(samples);
    }
  }
  // A pattern within 1 % of the best holds as much up to the sample's noise; the earlier one
  // (structured before textural) is kept, since its mask does not hang on the block scores alone.
  const double most = std::max({choice.captured[0], choice.captured[1], choice.captured[2]});
  std::size_t chosen_pattern = 0;
  while (choice.captured[chosen_pattern] < 0.99 * most) ++chosen_pattern;
  choice.pattern = kRainPatterns[chosen_pattern];
  return choice;
}

}  // namespace

Status run_rainfusion_cpu(const AttentionProblem& p, const RainFusionParams& params, RainFusionPlan* plan_out) {
  if (!p.video)
    return InvalidInput("RAINFUSION_ATTN needs the call's video geometry; pass AttentionProblem::video (frames x "
                        "height x width of the latent, and the text tokens before and after it)");
  if (p.mask || p.is_varlen() || p.causal || p.lse)
    return Unsupported("RAINFUSION_ATTN takes no mask, cu_seqlens, causal flag or lse; select TORCH_SDPA for those");
  if (!(params.sparsity >= 0.0 && params.sparsity <= 1.0) || params.sampled_queries < 1)
    return InvalidInput("RAINFUSION_ATTN: sparsity must be in [0, 1] and at least one query sampled, got sparsity " +
                        std::to_string(params.sparsity) + " and " + std::to_string(params.sampled_queries) + " samples");

  const VideoGeometry& g = *p.video;
  RainFusionPlan plan;
  plan.tiles = tile_sequence_for_rainfusion(g);
  const RainTiles& tiles = plan.tiles;
  const std::int64_t batch = p.q.size(0), tokens = p.q.size(1), heads_q = p.q.size(2), heads_kv = p.k.size(2);
  const std::int64_t d = p.q.size(3), dv = p.v.size(3), count = tiles.count(), padded = tiles.padded_length();
  const std::int64_t video = tiles.video_tiles, keep = rain_keep_tiles(params.sparsity, video);
  std::vector<float> q = cpu::gather_into_slots(p.q, tiles.slot, padded);
  std::vector<float> k = cpu::gather_into_slots(p.k, tiles.slot, padded);
  std::vector<float> v = cpu::gather_into_slots(p.v, tiles.slot, padded);
  const std::vector<double> q_means = video_tile_means(q, tiles, batch, heads_q, d);
  const std::vector<double> k_means = video_tile_means(k, tiles, batch, heads_kv, d);
  const Inputs in{tiles, q, k, q_means, k_means, batch, heads_q, heads_kv, d, p.softmax_scale()};

  // Each (batch, head) recognises its pattern and lists, for every query tile, its key tiles.
  const std::int64_t heads_total = batch * heads_q;
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(heads_total * count));
  plan.patterns.assign(static_cast<std::size_t>(heads_total), RainPattern::kTextural);
  plan.captured.assign(3, std::vector<double>(static_cast<std::size_t>(heads_total), 0.0));
#pragma omp parallel
  {
    std::vector<double> scores;
    std::vector<std::int32_t> scratch;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t bh = 0; bh < heads_total; ++bh) {
      const std::int64_t b = bh / heads_q, h = bh % heads_q;
      block_scores(in, b, h, scores);
      const HeadChoice choice = recognise_head(in, g, b, h, scores, keep, params.sampled_queries);
      plan.patterns[static_cast<std::size_t>(bh)] = choice.pattern;
      for (std::size_t i = 0; i < 3; ++i) plan.captured[i][static_cast<std::size_t>(bh)] = choice.captured[i];
      for (std::int64_t t = 0; t < count; ++t) {
        std::vector<std::int32_t>& row = rows[static_cast<std::size_t>(bh * count + t)];
        if (t < video) {
          rain_select_tiles(tiles, choice.pattern, t, scores.data() + t * video, keep, scratch, row);
          for (std::int64_t j = video; j < count; ++j) row.push_back(static_cast<std::int32_t>(j));
        } else {
          row.resize(static_cast<std::size_t>(count));
          for (std::int64_t j = 0; j < count; ++j) row[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(j);
        }
      }
    }
  }

  BlockSparseLayout& layout = plan.layout;
  layout.q_tile = layout.k_tile = static_cast<int>(kRainTileTokens);
  layout.batch = batch;
  layout.heads = heads_q;
  layout.q_tiles = layout.k_tiles = count;
  layout.tile_rows = tiles.valid;
  layout.offsets.reserve(rows.size() + 1);
  layout.offsets.push_back(0);
  std::int64_t video_pairs = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    layout.indices.insert(layout.indices.end(), rows[r].begin(), rows[r].end());
    layout.offsets.push_back(static_cast<std::int32_t>(layout.indices.size()));
    if (static_cast<std::int64_t>(r) % count < video)
      video_pairs += std::count_if(rows[r].begin(), rows[r].end(), [video](std::int32_t j) { return j < video; });
  }
  plan.video_density = static_cast<double>(video_pairs) / static_cast<double>(heads_total * video * video);
  plan.density = block_sparse_density(layout);

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
