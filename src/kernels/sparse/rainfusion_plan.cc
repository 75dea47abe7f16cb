#include "kernels/sparse/rainfusion_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

namespace diffattn {
namespace {

// Query tiles per work item of the list building: items of many heads interleave over the threads,
// so a call with fewer heads than threads still keeps every thread busy.
constexpr std::int64_t kTilesPerItem = 16;

struct HeadChoice {
  RainPattern pattern = RainPattern::kTextural;
  double captured[3] = {0.0, 0.0, 0.0};
};

template <typename Score>
struct Scratch {
  std::vector<Score> scores;
  std::vector<double> mass;
  std::vector<std::int32_t> select, chosen;
};

// The pattern whose masks hold the most of the sampled queries' attention.
template <typename Score>
HeadChoice recognise_head(const RainTiles& t, std::int64_t bh, const std::vector<std::int64_t>& slots,
                          std::int64_t keep, const RainScoreSource<Score>& source, Scratch<Score>& s) {
  const auto samples = static_cast<std::int64_t>(slots.size());
  HeadChoice choice;
  for (std::int64_t i = 0; i < samples; ++i) {
    const std::int64_t slot = slots[static_cast<std::size_t>(i)], tile = slot / kRainTileTokens;
    source.sampled_mass(bh, i, slot, s.mass);
    const Score* scores = source.block_scores(bh, tile, 1, s.scores);
    for (std::size_t p = 0; p < 3; ++p) {
      rain_select_tiles(t, kRainPatterns[p], tile, scores, keep, s.select, s.chosen);
      double held = 0.0;
      for (std::int32_t j : s.chosen) held += s.mass[static_cast<std::size_t>(j)];
      choice.captured[p] += held / static_cast<double>(samples);
    }
  }
  // A pattern within 1 % of the best holds as much up to the sample's noise; the earlier one
  // (structured before textural) is kept, since its mask does not hang on the block scores alone.
  const double most = std::max({choice.captured[0], choice.captured[1], choice.captured[2]});
  std::size_t chosen_pattern = 0;
  while (chosen_pattern < 2 && choice.captured[chosen_pattern] < 0.99 * most) ++chosen_pattern;
  choice.pattern = kRainPatterns[chosen_pattern];
  return choice;
}

}  // namespace

const char* rain_precision_name(RainPrecision precision) {
  switch (precision) {
    case RainPrecision::kBf16: return "bf16";
    case RainPrecision::kFp8: return "fp8";
    case RainPrecision::kMix: return "mix";
  }
  return "unknown";
}

Status check_rainfusion_call(const AttentionProblem& p, const RainFusionParams& params) {
  if (!p.video)
    return InvalidInput("RAINFUSION_ATTN needs the call's video geometry; pass AttentionProblem::video (frames x "
                        "height x width of the latent, and the text tokens before and after it)");
  if (p.mask || p.is_varlen() || p.causal || p.lse)
    return Unsupported("RAINFUSION_ATTN takes no mask, cu_seqlens, causal flag or lse; select TORCH_SDPA for those");
  if (params.precision != RainPrecision::kBf16 && p.q.dtype != DType::kFloat16 && p.q.dtype != DType::kBFloat16)
    return Unsupported(std::string("RAINFUSION_ATTN: block_sparse.precision '") +
                       rain_precision_name(params.precision) + "' quantizes float16 or bfloat16 inputs, got " +
                       std::string(dtype_name(p.q.dtype)) + "; convert q, k and v, or set block_sparse.precision to 'bf16'");
  if (!(params.sparsity >= 0.0 && params.sparsity <= 1.0) || params.sampled_queries < 1)
    return InvalidInput("RAINFUSION_ATTN: sparsity must be in [0, 1] and at least one query sampled, got sparsity " +
                        std::to_string(params.sparsity) + " and " + std::to_string(params.sampled_queries) +
                        " samples");
  return Status::Ok();
}

RainListShape rain_list_shape(const RainTiles& tiles, std::int64_t keep) {
  return RainListShape::of(tiles.video_tiles, tiles.text_tiles, tiles.patches_per_frame(), keep);
}

Status check_rain_list_size(const RainListShape& shape, std::int64_t heads_total) {
  if (heads_total * shape.per_head() <= std::numeric_limits<std::int32_t>::max()) return Status::Ok();
  return Unsupported("RAINFUSION_ATTN: the block lists of " + std::to_string(heads_total) + " heads would hold " +
                     std::to_string(heads_total * shape.per_head()) + " entries, more than int32 offsets address; "
                     "split the call's batch");
}

double rain_video_density(const RainListShape& shape) {
  return static_cast<double>(shape.listed) / static_cast<double>(shape.video_tiles);
}

std::vector<std::int64_t> rain_sampled_slots(const RainTiles& tiles, const VideoGeometry& g, int sampled) {
  const std::int64_t video_tokens = g.tokens(), samples = std::min<std::int64_t>(sampled, video_tokens);
  std::vector<std::int64_t> slots(static_cast<std::size_t>(std::max<std::int64_t>(samples, 0)));
  const RainTileMap map = rain_tile_map(g);
  for (std::int64_t s = 0; s < samples; ++s)
    slots[static_cast<std::size_t>(s)] = tiles.slot[static_cast<std::size_t>(map.sampled_token(s, samples))];
  return slots;
}

template <typename Score>
Status build_rainfusion_plan(const VideoGeometry& g, const RainFusionParams& params, std::int64_t batch,
                             std::int64_t heads_q, const RainScoreSource<Score>& source, RainFusionPlan& plan) {
  const RainTiles& tiles = plan.tiles;
  const std::int64_t count = tiles.count(), video = tiles.video_tiles, keep = rain_keep_tiles(params.sparsity, video);
  const std::int64_t heads_total = batch * heads_q;
  const std::vector<std::int64_t> slots = rain_sampled_slots(tiles, g, params.sampled_queries);

  plan.patterns.assign(static_cast<std::size_t>(heads_total), RainPattern::kTextural);
  plan.captured.assign(3, std::vector<double>(static_cast<std::size_t>(heads_total), 0.0));
#pragma omp parallel
  {
    Scratch<Score> s;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t bh = 0; bh < heads_total; ++bh) {
      const HeadChoice choice = recognise_head(tiles, bh, slots, keep, source, s);
      plan.patterns[static_cast<std::size_t>(bh)] = choice.pattern;
      for (std::size_t i = 0; i < 3; ++i) plan.captured[i][static_cast<std::size_t>(bh)] = choice.captured[i];
    }
  }

  // Every row's length is known before its tiles are: the offsets first, then the rows in parallel.
  const RainListShape shape = rain_list_shape(tiles, keep);
  const std::int64_t listed = shape.listed;
  DIFFATTN_RETURN_IF_ERROR(check_rain_list_size(shape, heads_total));
  BlockSparseLayout& layout = plan.layout;
  layout.q_tile = layout.k_tile = static_cast<int>(kRainTileTokens);
  layout.batch = batch;
  layout.heads = heads_q;
  layout.q_tiles = layout.k_tiles = count;
  layout.tile_rows = tiles.valid;
  layout.offsets.resize(static_cast<std::size_t>(heads_total * count + 1));
  for (std::int64_t r = 0; r <= heads_total * count; ++r)
    layout.offsets[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(shape.offset(r));
  layout.indices.resize(static_cast<std::size_t>(heads_total * shape.per_head()));

  const std::int64_t items_per_head = (count + kTilesPerItem - 1) / kTilesPerItem;
  std::int64_t short_rows = 0;  // rows whose scores did not rank (NaN)
#pragma omp parallel
  {
    Scratch<Score> s;
#pragma omp for schedule(dynamic, 1) reduction(+ : short_rows)
    for (std::int64_t item = 0; item < heads_total * items_per_head; ++item) {
      const std::int64_t bh = item / items_per_head, first = item % items_per_head * kTilesPerItem;
      const std::int64_t last = std::min(first + kTilesPerItem, count);
      const Score* scores =
          first < video ? source.block_scores(bh, first, std::min(last, video) - first, s.scores) : nullptr;
      const RainPattern pattern = plan.patterns[static_cast<std::size_t>(bh)];
      for (std::int64_t t = first; t < last; ++t) {
        std::int32_t* row = layout.indices.data() + layout.offsets[static_cast<std::size_t>(bh * count + t)];
        if (t >= video) {
          std::iota(row, row + count, 0);
          continue;
        }
        rain_select_tiles(tiles, pattern, t, scores + (t - first) * video, keep, s.select, s.chosen);
        if (static_cast<std::int64_t>(s.chosen.size()) != listed) {
          ++short_rows;
          continue;
        }
        row = std::copy(s.chosen.begin(), s.chosen.end(), row);
        std::iota(row, row + tiles.text_tiles, static_cast<std::int32_t>(video));
      }
    }
  }
  if (short_rows > 0)
    return InvalidInput("RAINFUSION_ATTN: the block scores of " + std::to_string(short_rows) +
                        " query tiles are not numbers (q or k holds inf or NaN); pass finite inputs");

  plan.video_density = rain_video_density(shape);
  plan.density = block_sparse_density(layout);
  return Status::Ok();
}

template Status build_rainfusion_plan<double>(const VideoGeometry&, const RainFusionParams&, std::int64_t,
                                              std::int64_t, const RainScoreSource<double>&, RainFusionPlan&);
template Status build_rainfusion_plan<float>(const VideoGeometry&, const RainFusionParams&, std::int64_t,
                                             std::int64_t, const RainScoreSource<float>&, RainFusionPlan&);

}  // namespace diffattn
