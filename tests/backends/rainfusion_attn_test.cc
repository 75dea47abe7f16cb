// RAINFUSION_ATTN on the CPU: its tiling, its pattern masks, the pattern a head with a known
// structure is recognised as, the density it keeps, text kept dense, the exact dense runs (sparsity
// 0, the step window, skip_layers), its output against dense attention on the runner's activations,
// and its refusals (each with nothing written to out).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "backends/rainfusion_attn/rainfusion_backend.h"
#include "backends/rainfusion_reference.h"
#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "kernels/cpu/rainfusion_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "parity/cases.h"
#include "parity/fresh_rng.h"
#include "parity/parity_check.h"
#include "parity/properties.h"
#include "runner/activation_generator.h"
#include "runner/quality_metrics.h"

namespace diffattn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ParityCase;

using testing::fresh_rng;

using testing::video_case;

Result<Attention> rainfusion_layer(const AttentionProblem& p, std::optional<BlockSparseSpec> block) {
  return testing::rainfusion_layer(p, std::move(block), probe_cpu_platform());
}

BlockSparseSpec sparsity(double s) {
  BlockSparseSpec b;
  b.sparsity = s;
  return b;
}

std::vector<std::uint8_t> out_bytes(const AttentionProblem& p) {
  const auto* data = static_cast<const std::uint8_t*>(p.out.data);
  return std::vector<std::uint8_t>(data, data + p.out.numel() * dtype_size(p.out.dtype));
}

// TORCH_SDPA's bytes for the call: what an exactly dense run must reproduce.
std::vector<std::uint8_t> dense_bytes(const AttentionProblem& p) {
  testing::poison(p.out);
  EXPECT_TRUE(run_sdpa_cpu(p).ok());
  return out_bytes(p);
}

std::vector<std::int32_t> listed(const BlockSparseLayout& layout, std::int64_t row) {
  return std::vector<std::int32_t>(layout.indices.begin() + layout.offsets[row], layout.indices.begin() + layout.offsets[row + 1]);
}

static_assert(kRainTileTokens == 128, "the tilings below are written out for 128-token tiles");

TEST(RainfusionTiles, FramePatchesComeFirstThenTheTextInTilesOf128) {
  VideoGeometry g{3, 13, 28};  // patches of 8 x 16, partial in both directions
  g.text_before = 5, g.text_after = 150;
  const RainTiles t = tile_sequence_for_rainfusion(g);
  EXPECT_EQ(t.patch_h, 8);
  EXPECT_EQ(t.patch_w, 16);
  EXPECT_EQ(t.patches_h, 2);
  EXPECT_EQ(t.patches_w, 2);
  EXPECT_EQ(t.video_tiles, 12);
  EXPECT_EQ(t.text_tiles, 2);
  EXPECT_THAT(t.valid, ElementsAre(128, 96, 80, 60, 128, 96, 80, 60, 128, 96, 80, 60, 128, 27));
  EXPECT_EQ(t.slot[0], 12 * 128);                     // the first text token opens the first text tile
  EXPECT_EQ(t.slot[5], 0);                            // the video's first token
  EXPECT_EQ(t.slot[5 + 16], 128);                     // column 16 opens the twelve-column patch
  EXPECT_EQ(t.slot[5 + 28 + 16], 128 + 12);           // its next row
  EXPECT_EQ(t.slot[5 + 28 * 8], 2 * 128);             // row 8 opens the five-row patch
  EXPECT_EQ(t.slot[5 + 364], 4 * 128);                // frame 1
  EXPECT_EQ(t.slot[5 + 3 * 364 + 149], 13 * 128 + 26);  // the last text token
  std::set<std::int64_t> seen(t.slot.begin(), t.slot.end());
  EXPECT_EQ(seen.size(), t.slot.size());
  for (std::int64_t s : t.slot) EXPECT_LT(s % 128, t.valid[s / 128]);
  // The map the CUDA kernels evaluate in place: every slot holds its token, or -1 where it pads;
  // here and on the frames under a patch's height or width below.
  const auto expect_map_inverts_slots = [](const VideoGeometry& geometry) {
    const RainTiles tiles = tile_sequence_for_rainfusion(geometry);
    const RainTileMap map = rain_tile_map(geometry);
    std::vector<std::int64_t> token_of_slot(static_cast<std::size_t>(map.padded_length()), -1);
    for (std::size_t token = 0; token < tiles.slot.size(); ++token)
      token_of_slot[static_cast<std::size_t>(tiles.slot[token])] = static_cast<std::int64_t>(token);
    for (std::int64_t slot = 0; slot < map.padded_length(); ++slot)
      EXPECT_EQ(map.token_at(slot), token_of_slot[static_cast<std::size_t>(slot)])
          << geometry.frames << "x" << geometry.height << "x" << geometry.width << " slot " << slot;
  };
  expect_map_inverts_slots(g);
  VideoGeometry low_text{2, 4, 80};
  low_text.text_before = 130;
  expect_map_inverts_slots(low_text);
  VideoGeometry narrow_text{2, 20, 10};
  narrow_text.text_after = 3;
  expect_map_inverts_slots(narrow_text);
  const RainTiles low = tile_sequence_for_rainfusion({2, 4, 80});  // under 8 rows: patches 4 x 32
  EXPECT_EQ(low.patch_h, 4);
  EXPECT_EQ(low.patch_w, 32);
  EXPECT_THAT(low.valid, ElementsAre(128, 128, 64, 128, 128, 64));
  const RainTiles narrow = tile_sequence_for_rainfusion({2, 20, 10});  // under 16 columns: patches 12 x 10
  EXPECT_EQ(narrow.patch_h, 12);
  EXPECT_EQ(narrow.patch_w, 10);
  EXPECT_THAT(narrow.valid, ElementsAre(120, 80, 120, 80));
}

// Every patch is a padded tile that the fine pass computes whole, so a frame gets the shape that
// cuts it into the fewest; 8 x 16 among equals.
TEST(RainfusionTiles, PatchShapeCutsEachFrameIntoTheFewestTiles) {
  struct Frame {
    std::int64_t height, width, patch_h, patch_w, patches;
  };
  const Frame frames[] = {
      {45, 80, 8, 16, 30},   // Wan2.1 720p: 8 x 16 is as few as any (the last patch row of 5)
      {30, 52, 15, 8, 14},   // Wan2.1 480p: 14 patches of 15 x 8 instead of 16 of 8 x 16
      {60, 104, 6, 21, 50},  // 50 instead of 56
      {16, 32, 8, 16, 4},    // whole 8 x 16 patches
      {10, 20, 6, 20, 2},    // two patches instead of four
      {13, 28, 8, 16, 4},    // four patches either way: 8 x 16
  };
  for (const Frame& f : frames) {
    const RainTiles t = tile_sequence_for_rainfusion({2, f.height, f.width});
    EXPECT_EQ(t.patch_h, f.patch_h) << f.height << " x " << f.width;
    EXPECT_EQ(t.patch_w, f.patch_w) << f.height << " x " << f.width;
    EXPECT_EQ(t.patches_per_frame(), f.patches) << f.height << " x " << f.width;
    // No shape the rule admits gives fewer patches.
    for (std::int64_t rows = 4; rows <= std::min<std::int64_t>(32, f.height); ++rows) {
      const std::int64_t cols = std::min<std::int64_t>(f.width, 128 / rows);
      if (cols < 4 || rows > 4 * cols || cols > 4 * rows) continue;
      EXPECT_GE(((f.height + rows - 1) / rows) * ((f.width + cols - 1) / cols), f.patches) << rows << " x " << cols;
    }
  }
}

TEST(RainfusionMask, EachPatternFillsTheBudgetInItsOrderAfterTheSink) {
  const RainTiles t = tile_sequence_for_rainfusion({4, 16, 32});  // 4 frames of 2 x 2 patches
  std::vector<double> scores(16, 0.0);
  std::vector<std::int32_t> scratch, out;
  rain_select_tiles(t, RainPattern::kSpatial, 9, scores.data(), 8, scratch, out);
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 8, 9, 10, 11));  // sink, then frame 2
  rain_select_tiles(t, RainPattern::kTemporal, 9, scores.data(), 7, scratch, out);
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 5, 9, 13));  // sink, then patch 1 of frames 1-3
  scores[14] = 3.0, scores[6] = 2.0;
  rain_select_tiles(t, RainPattern::kTextural, 9, scores.data(), 6, scratch, out);
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 6, 14));
  rain_select_tiles(t, RainPattern::kSpatial, 9, scores.data(), 5, scratch, out);
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 8));  // the same frame, ties to the lower index
  rain_select_tiles(t, RainPattern::kSpatial, 9, scores.data(), 2, scratch, out);
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3));  // the sink stays whole
  EXPECT_EQ(rain_keep_tiles(0.8, 100), 20);
  EXPECT_EQ(rain_keep_tiles(0.0, 7), 7);
  EXPECT_EQ(rain_keep_tiles(1.0, 7), 1);
}

// Keys carry one direction per frame (spatial head) or per patch position (temporal head), and the
// queries the same: each head is recognised as the pattern its keys were built for.
TEST(RainfusionCpu, HeadsBuiltSpatialTemporalAndTexturalAreRecognisedAsSuch) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  const VideoGeometry g{6, 16, 32};  // 6 frames of 2 x 2 patches: 24 tiles
  auto data = testing::make_case_data(video_case(DType::kFloat32, g, 3, 3), rng);
  AttentionProblem& p = data->problem;
  for (std::int64_t i = 0; i < g.tokens(); ++i) {
    const std::int64_t f = i / 512, y = i / 32 % 16, x = i % 32, position = (y / 8) * 2 + x / 16;
    for (std::int64_t e = 0; e < 64; ++e) {
      const double noise = 0.1 * std::normal_distribution<double>()(rng);
      const double values[3][2] = {{e == f ? 1.0 : 0.0, e == f ? 6.0 : 0.0},                          // spatial
                                   {e == 10 + position ? 1.0 : 0.0, e == 10 + position ? 6.0 : 0.0},  // temporal
                                   {e == 20 && f == 4 && position == 3 ? 8.0 : 0.0, e == 20 ? 6.0 : 0.0}};  // one tile
      for (std::int64_t h = 0; h < 3; ++h) {
        testing::write_element(p.k, testing::element_offset(p.k, {0, i, h, e}), values[h][0] + noise);
        testing::write_element(p.q, testing::element_offset(p.q, {0, i, h, e}), values[h][1]);
      }
    }
  }
  p.scale = 1.0f;
  RainFusionParams params;
  params.sparsity = 0.7;  // 7 of 24 key tiles: the sink (4) and 3 more
  RainFusionPlan plan;
  ASSERT_TRUE(run_rainfusion_cpu(p, params, &plan).ok());
  EXPECT_THAT(plan.patterns, ElementsAre(RainPattern::kSpatial, RainPattern::kTemporal, RainPattern::kTextural))
      << "seed " << seed << "; spatial head held " << plan.captured[0][0] << " / " << plan.captured[1][0] << " / "
      << plan.captured[2][0];
  EXPECT_DOUBLE_EQ(plan.video_density, 7.0 / 24.0);
}

TEST(RainfusionCpu, DensityFollowsTheTargetAndTextIsKeptDense) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  VideoGeometry g{8, 24, 48};  // 3 x 3 patches a frame: 72 video tiles
  g.text_before = 30, g.text_after = 50;
  auto data = testing::make_case_data(video_case(DType::kBFloat16, g, 4, 2), rng);
  for (double s : {0.5, 0.75, 0.8, 0.9}) {
    RainFusionParams params;
    params.sparsity = s;
    RainFusionPlan plan;
    ASSERT_TRUE(run_rainfusion_cpu(data->problem, params, &plan).ok());
    const RainTiles& t = plan.tiles;
    const double keep = static_cast<double>(std::max<std::int64_t>(rain_keep_tiles(s, 72), 9));  // the sink is 9 tiles
    EXPECT_DOUBLE_EQ(plan.video_density, keep / 72.0) << "sparsity " << s;
    EXPECT_NEAR(plan.video_density, 1.0 - s, 0.5 / 72.0 + (s == 0.9 ? 0.03 : 0.0)) << "sparsity " << s;
    std::printf("[ DENSITY  ] sparsity %.2f: video density %.3f, with text %.3f\n", s, plan.video_density, plan.density);
    for (std::int64_t bh = 0; bh < 4; ++bh)
      for (std::int64_t q = 0; q < t.count(); ++q) {
        const std::vector<std::int32_t> row = listed(plan.layout, bh * t.count() + q);
        if (q >= t.video_tiles) {
          EXPECT_EQ(static_cast<std::int64_t>(row.size()), t.count()) << "text tile " << q;
          continue;
        }
        for (std::int64_t j = t.video_tiles; j < t.count(); ++j)
          EXPECT_NE(std::find(row.begin(), row.end(), j), row.end()) << "video tile " << q << " drops text tile " << j;
        for (std::int32_t j = 0; j < 9; ++j) EXPECT_EQ(row[static_cast<std::size_t>(j)], j) << "the first frame's tiles";
      }
  }
}

// The sparse pass is exact attention over what it lists: the float64 oracle given the plan's mask.
TEST(RainfusionCpu, TheSparsePassIsTheOracleOverTheListedTiles) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  VideoGeometry joint{2, 13, 28};  // 2 x 2 patches of 8 x 16 a frame, partial in both directions
  joint.text_after = 37;
  VideoGeometry prefix{3, 16, 12};  // patches of 10 x 12, the second of 6 rows
  prefix.text_before = 150;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (const VideoGeometry& g : {joint, prefix}) {
      ParityCase c = video_case(dtype, g, 4, dtype == DType::kFloat16 ? 1 : 2);
      c.batch = dtype == DType::kFloat32 ? 2 : 1;  // the float64 oracle over a dense mask dominates the time
      c.layout = dtype == DType::kFloat16 ? testing::Layout::kHeadMajor : testing::Layout::kContiguous;
      auto data = testing::make_case_data(c, rng);
      for (double s : {0.0, 0.6}) {
        RainFusionParams params;
        params.sparsity = s;
        RainFusionPlan plan;
        testing::poison(data->problem.out);
        ASSERT_TRUE(run_rainfusion_cpu(data->problem, params, &plan).ok());
        if (s == 0.0) EXPECT_DOUBLE_EQ(plan.density, 1.0);
        AttentionProblem masked = testing::problem_with_plan_mask(*data, plan);
        testing::Expectation e = testing::expect(masked);
        EXPECT_EQ(testing::compare(data->problem, e), "") << c.name() << " sparsity " << s << " (seed " << seed << ")";
      }
    }
}

TEST(RainfusionAttnBackend, SparsityZeroTheStepWindowAndSkipLayersRunExactlyDense) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  VideoGeometry g{6, 16, 24};
  g.text_after = 20;
  auto data = testing::make_case_data(video_case(DType::kBFloat16, g, 2, 2), rng);
  AttentionProblem& p = data->problem;
  const std::vector<std::uint8_t> dense = dense_bytes(p);
  BlockSparseSpec window = sparsity(0.8);
  window.start_step = 3, window.end_step = 2;
  window.skip_layers = "1,4";
  window.skip_layer_indices = {1, 4};
  struct Call {
    BlockSparseSpec options;
    std::int64_t step, layer;
    bool dense;
  };
  const Call calls[] = {{sparsity(0.0), 5, 0, true}, {window, 0, 0, true},  {window, 2, 2, true},
                        {window, 3, 2, false},       {window, 7, 2, false}, {window, 8, 2, true},
                        {window, 9, 0, true},        {window, 5, 1, true},  {window, 5, 4, true},
                        {window, 5, 3, false}};
  for (const Call& call : calls) {
    auto layer = rainfusion_layer(p, call.options);
    ASSERT_TRUE(layer.ok()) << layer.status().message();
    AttentionProblem run = p;
    run.denoising = DenoisingStep{call.step, 10, std::nullopt, call.layer};
    testing::poison(p.out);
    const Status s = layer->forward(run, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    if (call.dense) EXPECT_EQ(out_bytes(p), dense) << "step " << call.step << " layer " << call.layer;
    else EXPECT_NE(out_bytes(p), dense) << "step " << call.step << " layer " << call.layer << " ran dense";
  }
}

// Q and K of 3D positional codes (each channel a sinusoid of the frame, row or column, as 3D rotary
// codes are) plus noise: nearby tokens in space and time attend to each other.
void fill_video_local(runner::HostTensor& t, const VideoGeometry& g, std::uint64_t seed, bool values) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise;
  const std::int64_t heads = t.shape()[2], d = t.shape()[3];
  std::vector<double> freq(static_cast<std::size_t>(heads * d)), phase(freq.size());
  std::mt19937_64 shared(seed >> 1);  // Q and K share the codes' frequencies and phases
  for (std::size_t i = 0; i < freq.size(); ++i) {
    freq[i] = std::pow(10.0, -1.3 + 1.0 * std::uniform_real_distribution<double>()(shared));
    phase[i] = 6.283185307 * std::uniform_real_distribution<double>()(shared);
  }
  for (std::int64_t i = 0; i < g.tokens(); ++i) {
    const double coord[3] = {static_cast<double>(i / (g.height * g.width)), static_cast<double>(i / g.width % g.height),
                             static_cast<double>(i % g.width)};
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t e = 0; e < d; ++e) {
        const std::size_t c = static_cast<std::size_t>(h * d + e);
        const double code = 2.0 * std::sin(freq[c] * 6.0 * coord[e % 3] + phase[c]);
        t.set((i * heads + h) * d + e, static_cast<float>(values ? noise(rng) : code + 0.5 * noise(rng)));
      }
  }
}

// relL2 and cosine against TORCH_SDPA on the same inputs: on the runner's activations (per-head
// scales, offsets, outlier channels, 3D locality of the video) and on video-local ones.
TEST(RainfusionAttnBackend, ErrorAgainstDenseIsReportedOnVideoLikeInputs) {
  const VideoGeometry g{8, 16, 32};  // 4096 tokens, 32 tiles
  const std::int64_t heads = 4, d = 64;
  const std::uint64_t seed = std::random_device()();
  for (bool local : {false, true}) {
    runner::HostTensor q(DType::kBFloat16, {1, g.tokens(), heads, d}), k = q, v = q;
    if (local) {
      fill_video_local(q, g, seed, false);
      fill_video_local(k, g, seed + 2, false);
      fill_video_local(v, g, seed + 4, true);
    } else {
      runner::ActivationKey key;
      key.seed = seed;
      key.model = "rainfusion-test";
      key.role = "self";
      key.step = 40, key.num_steps = 50;
      key.video = g;
      runner::generate_activations(key, runner::ActivationStats{}, q, k, v);
    }
    runner::HostTensor dense_out = q, out = q;
    AttentionProblem p;
    p.q = q.view(), p.k = k.view(), p.v = v.view();
    p.video = g;
    p.out = dense_out.view();
    ASSERT_TRUE(run_sdpa_cpu(p).ok());
    p.out = out.view();
    double previous = 0.0;
    for (double s : {0.5, 0.8, 0.9}) {
      RainFusionParams params;
      params.sparsity = s;
      RainFusionPlan plan;
      ASSERT_TRUE(run_rainfusion_cpu(p, params, &plan).ok());
      const runner::QualityMetrics m = runner::compare_outputs(out, dense_out);
      int counts[3] = {0, 0, 0};
      for (RainPattern pattern : plan.patterns) ++counts[static_cast<int>(pattern)];
      std::printf("[ QUALITY  ] %s, sparsity %.2f: video density %.3f, relL2 %.4f, cosine %.5f (heads %d spatial, "
                  "%d temporal, %d textural; seed %llu)\n", local ? "video-local" : "runner activations", s,
                  plan.video_density, m.rel_l2, m.cosine, counts[0], counts[1], counts[2],
                  static_cast<unsigned long long>(seed));
      EXPECT_EQ(m.non_finite, 0);
      EXPECT_GE(m.rel_l2, previous * 0.9) << "dropping more should not lose less";
      previous = m.rel_l2;
    }
  }
}

TEST(RainfusionAttnBackend, RefusalsSayWhatToDoAndWriteNothing) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  const ParityCase c = video_case(DType::kBFloat16, {5, 9, 10});
  BlockSparseSpec window = sparsity(0.8);
  window.start_step = 2;
  BlockSparseSpec last = sparsity(0.8);
  last.end_step = 2;
  BlockSparseSpec skip = sparsity(0.8);
  skip.skip_layers = "0";
  skip.skip_layer_indices = {0};
  struct Bad {
    const char* what;
    BlockSparseSpec options;
    std::function<void(AttentionProblem&)> apply;
    ErrorCode code;
    const char* message;
  };
  const Bad cases[] = {
      {"no geometry", sparsity(0.8), [](AttentionProblem& p) { p.video.reset(); }, ErrorCode::kUnsupported,
       "AttentionProblem::video"},
      {"a geometry of other tokens", sparsity(0.8), [](AttentionProblem& p) { p.video->text_after = 3; },
       ErrorCode::kInvalidInput, "holds 453 tokens with 0 + 3 text tokens but q has 450"},
      {"a start_step without the step", window, [](AttentionProblem& p) { p.denoising.reset(); },
       ErrorCode::kInvalidInput, "set AttentionProblem::denoising.index"},
      {"an end_step without num_steps", last, [](AttentionProblem& p) { p.denoising = DenoisingStep{}; },
       ErrorCode::kInvalidInput, "num_steps"},
      {"skip_layers without the layer", skip, [](AttentionProblem& p) { p.denoising = DenoisingStep{}; },
       ErrorCode::kInvalidInput, "denoising.layer"},
  };
  for (const Bad& bad : cases) {
    auto data = testing::make_case_data(c, rng);
    AttentionProblem call = data->problem;
    bad.apply(call);
    auto layer = rainfusion_layer(data->problem, bad.options);
    ASSERT_TRUE(layer.ok()) << layer.status().message();
    testing::poison(data->problem.out);
    const Status s = layer->forward(call, nullptr);
    EXPECT_EQ(s.code(), bad.code) << bad.what << ": " << s.message();
    EXPECT_THAT(s.message(), HasSubstr(bad.message)) << bad.what;
    EXPECT_EQ(testing::check_untouched(data->problem), "") << bad.what;
  }
}

// precision fp8 and mix run the fine pass on SAGE_ATTN's 8-bit arithmetic over the very lists of
// the bf16 pass: the output is SAGE_ATTN's block-sparse walk over the call's plan (bit for bit, on
// the same padded 16-bit sequence), within the 8-bit bounds of the bf16 pass, with mix (16-bit
// P V) closer than fp8; float32 inputs are refused before out is touched.
TEST(RainfusionAttnBackend, Fp8AndMixRunTheEightBitArithmeticOverTheSameLists) {
  std::uint64_t seed = 0;
  auto rng = fresh_rng(seed);
  VideoGeometry g{4, 16, 32};
  g.text_after = 40;
  auto data = testing::make_case_data(video_case(DType::kBFloat16, g, 2, 2), rng);
  AttentionProblem& p = data->problem;
  RainFusionPlan plan;
  ASSERT_TRUE(run_rainfusion_cpu(p, RainFusionParams{}, &plan).ok());
  std::vector<double> bf16_out;
  testing::for_each_offset(p.out, [&](std::int64_t off) { bf16_out.push_back(testing::read_element(p.out, off)); });
  double errors[2] = {0, 0};
  int at = 0;
  for (const char* precision : {"fp8", "mix"}) {
    const std::string json = std::string(R"({"default": {"backend": "RAINFUSION_ATTN", "block_sparse": {"precision": ")") +
                             precision + R"("}}})";
    auto config = parse_attention_config_json(json, global_registry());
    ASSERT_TRUE(config.ok()) << config.status().message();
    BlockSparseSpec block = *config->default_spec->block_sparse;
    auto layer = rainfusion_layer(p, block);
    ASSERT_TRUE(layer.ok()) << layer.status().message();
    testing::poison(p.out);
    ASSERT_TRUE(layer->forward(p, nullptr).ok());
    std::vector<double> got;
    testing::for_each_offset(p.out, [&](std::int64_t off) { got.push_back(testing::read_element(p.out, off)); });
    // The same call through the kernel function, with its plan: the plan is the bf16 pass's.
    RainFusionParams params;
    params.precision = at == 0 ? RainPrecision::kFp8 : RainPrecision::kMix;
    RainFusionPlan eight_bit_plan;
    testing::poison(p.out);
    ASSERT_TRUE(run_rainfusion_cpu(p, params, &eight_bit_plan).ok());
    EXPECT_EQ(eight_bit_plan.layout.indices, plan.layout.indices) << precision;
    std::vector<double> direct;
    testing::for_each_offset(p.out, [&](std::int64_t off) { direct.push_back(testing::read_element(p.out, off)); });
    EXPECT_EQ(direct, got) << precision;
    double err = 0, norm = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      err += (got[i] - bf16_out[i]) * (got[i] - bf16_out[i]);
      norm += bf16_out[i] * bf16_out[i];
    }
    errors[at++] = std::sqrt(err / norm);
    std::printf("[ RAINFUSION ] precision %s: relL2 %.4f against the bf16 pass\n", precision, errors[at - 1]);
  }
  EXPECT_GT(errors[0], 0.0) << "fp8 must run its own arithmetic (seed " << seed << ")";
  EXPECT_LE(errors[0], 0.06) << "seed " << seed;
  EXPECT_LE(errors[1], 0.02) << "seed " << seed;
  EXPECT_LT(errors[1], errors[0]) << "seed " << seed;
  // float32 inputs: nothing to quantize them from.
  auto f32 = testing::make_case_data(video_case(DType::kFloat32, g, 2, 2), rng);
  RainFusionParams fp8;
  fp8.precision = RainPrecision::kFp8;
  const Status refused = run_rainfusion_cpu(f32->problem, fp8);
  EXPECT_EQ(refused.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(refused.message(), HasSubstr("set block_sparse.precision to 'bf16'"));
  EXPECT_EQ(testing::check_untouched(f32->problem), "");
}

TEST(RainfusionAttnBackend, UnknownOptionsAreInvalidAndDefaultsAreFilled) {
  AttentionSpec extra;
  extra.backend = "RAINFUSION_ATTN";
  extra.extra = {{"block_size", 128}};
  const Status s = validate_rainfusion_attn_options(extra);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidConfig);
  // The configuration fills the defaults: sparsity 0.8, dense window empty, bf16.
  auto config = parse_attention_config_json(R"({"default": "RAINFUSION_ATTN"})", global_registry());
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(config->default_spec->block_sparse.has_value());
  EXPECT_EQ(config->default_spec->block_sparse->sparsity, 0.8);
}

TEST(RainfusionAttnBackend, RunsOnTheCpuAndOnAmpereToHopperWithTheBlockSparseKernels) {
  const BackendDescriptor& d = **global_registry().find("RAINFUSION_ATTN");
  EXPECT_FALSE(d.unavailable_reason(probe_cpu_platform()).has_value());
  PlatformInfo h200;
  h200.kind = PlatformKind::kCuda, h200.cc_major = 9, h200.cc_minor = 0;
  const auto reason = d.unavailable_reason(h200);  // a build without the CUDA kernels
  ASSERT_TRUE(reason.has_value());
  EXPECT_THAT(*reason, HasSubstr("block-sparse kernels"));
  h200.features.flash_attn = true;
  EXPECT_FALSE(d.unavailable_reason(h200).has_value());
  ASSERT_EQ(d.cuda.needs.size(), 1u);
  EXPECT_EQ(d.cuda.needs[0].fact, PlatformFact::kArchitecture);
  ASSERT_EQ(d.cuda.needs[0].archs.size(), 1u);
  EXPECT_EQ(d.cuda.needs[0].archs[0].min, 80);
  EXPECT_EQ(d.cuda.needs[0].archs[0].max, 90);
  EXPECT_TRUE(d.caps.needs_video_geometry);
  EXPECT_FALSE(d.caps.gate);
  EXPECT_THAT(d.caps.option_blocks, ElementsAre("block_sparse"));
  ASSERT_EQ(d.kernels.size(), 2u);
  EXPECT_EQ(d.kernels[0].device, DeviceKind::kCpu);
  EXPECT_EQ(d.kernels[1].device, DeviceKind::kCuda);
  // CUDA tensors: half precision, head sizes 64 and 128, Dv == D; CPU tensors take every capability.
  ProblemShape shape;
  shape.dtype = DType::kFloat32, shape.seqlen_q = shape.seqlen_kv = 450, shape.heads_q = shape.heads_kv = 2;
  shape.head_size = shape.head_size_v = 96, shape.video_geometry = true;
  EXPECT_THAT(d.unsupported_reasons(shape), ::testing::IsEmpty());
  shape.device = DeviceKind::kCuda;
  EXPECT_THAT(d.unsupported_reasons(shape),
              ElementsAre(HasSubstr("dtype float32 is not supported on CUDA tensors"),
                          HasSubstr("head_size 96 is not supported on CUDA tensors (supported: 64, 128")));
  shape.dtype = DType::kBFloat16, shape.head_size = 128, shape.head_size_v = 64;
  EXPECT_THAT(d.unsupported_reasons(shape), ElementsAre(HasSubstr("value head size must equal")));
  shape.head_size_v = 128;
  EXPECT_THAT(d.unsupported_reasons(shape), ::testing::IsEmpty());
}

}  // namespace
}  // namespace diffattn
