// FASTVIDEO_VSA on the CPU: its cube tiling, the top-k it picks on a hand-built video, parity with
// dense attention when every cube is kept, parity with the float64 VSA reference when few are,
// and its refusals (each with nothing written to out).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "backends/vsa_reference.h"
#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "kernels/cpu/vsa_cpu.h"
#include "kernels/sparse/vsa_cubes.h"
#include "parity/cases.h"
#include "parity/fresh_rng.h"
#include "parity/parity_check.h"
#include "parity/properties.h"

namespace diffattn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ParityCase;

using testing::fresh_rng;

using testing::video_case;

Result<Attention> vsa_layer(const AttentionProblem& p, std::optional<std::int64_t> topk) {
  AttentionLayerDesc desc;
  desc.num_heads = static_cast<int>(p.q.size(2));
  desc.num_kv_heads = static_cast<int>(p.k.size(2));
  desc.head_size = static_cast<int>(p.q.size(3));
  AttentionSpec spec;
  spec.backend = "FASTVIDEO_VSA";
  spec.fastvideo_vsa_topk = topk;
  AttentionConfig config;
  config.default_spec = spec;
  Selector selector(make_platform(probe_cpu_platform(), global_registry()), &global_registry());
  return Attention::Create(desc, config, selector);
}

// A [B, S, H, Dv] gate buffer in the case's dtype, filled like a model's sigmoid-free projection.
TensorView add_gate(testing::CaseData& data, std::mt19937_64& rng) {
  const AttentionProblem& p = data.problem;
  testing::HostBuffer& buf = data.add(p.out.dtype, p.out.numel());
  TensorView gate = TensorView::Contiguous(buf.data(), p.out.dtype, {p.out.size(0), p.out.size(1), p.out.size(2), p.out.size(3)});
  testing::fill_normal(gate, rng, 0.5);
  return gate;
}

TEST(VsaCubes, PartialCubesAtTheFarEdgesHoldTheRemainder) {
  const VsaCubes cubes = tile_video_into_cubes({5, 6, 7});  // 2 x 2 x 2 cubes: extents {4, 1} x {4, 2} x {4, 3}
  EXPECT_EQ(cubes.grid_t, 2);
  EXPECT_EQ(cubes.grid_h, 2);
  EXPECT_EQ(cubes.grid_w, 2);
  EXPECT_THAT(cubes.valid, ElementsAre(64, 48, 32, 24, 16, 12, 8, 6));
  EXPECT_TRUE(cubes.has_partial_cubes());
  EXPECT_EQ(cubes.padded_length(), 8 * 64);
  auto slot = [&](std::int64_t t, std::int64_t y, std::int64_t x) { return cubes.slot[(t * 6 + y) * 7 + x]; };
  EXPECT_EQ(slot(0, 0, 0), 0);
  EXPECT_EQ(slot(0, 0, 3), 3);
  EXPECT_EQ(slot(0, 1, 0), 4);
  EXPECT_EQ(slot(1, 0, 0), 16);
  EXPECT_EQ(slot(0, 0, 4), 64);           // cube 1 (3 columns wide), first token
  EXPECT_EQ(slot(0, 1, 4), 64 + 3);       // its rows are 3 tokens long
  EXPECT_EQ(slot(4, 5, 6), 7 * 64 + 5);   // the last cube: 1 x 2 x 3, last token
  // Every token has its own slot, inside its cube's valid prefix.
  std::set<std::int64_t> seen(cubes.slot.begin(), cubes.slot.end());
  EXPECT_EQ(seen.size(), cubes.slot.size());
  for (std::int64_t s : cubes.slot) EXPECT_LT(s % 64, cubes.valid[s / 64]);
  EXPECT_FALSE(tile_video_into_cubes({4, 8, 12}).has_partial_cubes());
}

TEST(VsaCubes, TopkFollowsFastVideosSparsityRuleAndIsCheckedAgainstTheGeometry) {
  EXPECT_EQ(vsa_topk_for_sparsity(0.0, 8), 8);
  EXPECT_EQ(vsa_topk_for_sparsity(0.875, 8), 1);
  EXPECT_EQ(vsa_topk_for_sparsity(0.5, 7), 4);
  EXPECT_EQ(vsa_topk_for_sparsity(0.999, 10), 1);
  EXPECT_EQ(vsa_topk_for_sparsity(0.875, 1560), 195);
  EXPECT_TRUE(check_vsa_topk(8, {5, 6, 7}).ok());
  for (std::int64_t bad : {0, -3, 9}) {
    const Status s = check_vsa_topk(bad, {5, 6, 7});
    EXPECT_EQ(s.code(), ErrorCode::kInvalidInput);
    EXPECT_THAT(s.message(), HasSubstr("8 cubes"));
    EXPECT_THAT(s.message(), HasSubstr("1..8"));
  }
}

// Keys are constant per cube along one axis each, so the cube means and the coarse scores are
// known exactly: query cube c scores key cube (c + 1) % 8 highest (10) and (c + 5) % 8 next (5).
TEST(FastvideoVsaCpu, AHandBuiltVideoWithPartialCubesPicksTheExpectedCubes) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  const VideoGeometry g{5, 6, 7};
  auto data = testing::make_case_data(video_case(DType::kFloat32, g, 1, 1), rng);
  AttentionProblem& p = data->problem;
  for (std::int64_t i = 0; i < g.tokens(); ++i) {
    const std::int64_t c = testing::reference_cube_of(g, i);
    for (std::int64_t e = 0; e < 64; ++e) {
      const double k = e == c ? 1.0 : 0.0;
      const double q = e == (c + 1) % 8 ? 10.0 : e == (c + 5) % 8 ? 5.0 : 0.0;
      testing::write_element(p.k, testing::element_offset(p.k, {0, i, 0, e}), k);
      testing::write_element(p.q, testing::element_offset(p.q, {0, i, 0, e}), q);
    }
  }
  p.scale = 1.0f;
  BlockSparseLayout chosen;
  ASSERT_TRUE(run_fastvideo_vsa_cpu(p, 2, &chosen).ok());
  ASSERT_EQ(chosen.q_tiles, 8);
  for (std::int32_t c = 0; c < 8; ++c) {
    std::vector<std::int32_t> want = {(c + 1) % 8, (c + 5) % 8};
    std::sort(want.begin(), want.end());
    const std::int64_t r = chosen.row(0, 0, c);
    EXPECT_EQ(std::vector<std::int32_t>(chosen.indices.begin() + chosen.offsets[r], chosen.indices.begin() + chosen.offsets[r + 1]), want)
        << "query cube " << c;
  }
  // The fine branch saw only those cubes' valid tokens: padding keys would shift every row.
  testing::VsaReference ref = testing::reference_vsa(p, 2);
  EXPECT_LE(testing::max_errors(p, ref.out).out, 1e-5) << "seed " << seed;
}

TEST(FastvideoVsaCpu, EveryCubeKeptIsDenseAttentionWithinBf16Tolerance) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  for (VideoGeometry g : {VideoGeometry{6, 9, 5}, VideoGeometry{4, 8, 8}}) {
    ParityCase c = video_case(DType::kBFloat16, g, 4, 2);
    c.batch = 2;
    auto data = testing::make_case_data(c, rng);
    AttentionProblem& p = data->problem;
    testing::Expectation dense = testing::expect(p);
    const std::int64_t cubes = tile_video_into_cubes(g).count();
    for (std::optional<std::int64_t> topk : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{cubes}}) {
      auto layer = vsa_layer(p, topk);
      ASSERT_TRUE(layer.ok()) << layer.status().message();
      testing::poison(p.out);
      const Status s = layer->forward(p, nullptr);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(testing::compare(p, dense), "") << c.name() << " (seed " << seed << ")";
    }
  }
}

TEST(FastvideoVsaCpu, FewCubesWithAGateMatchTheFloat64Reference) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (bool gated : {true, false}) {
      ParityCase c = video_case(dtype, {7, 8, 10}, 4, 2);  // 2 x 2 x 3 = 12 cubes, partial in frames and width
      c.layout = testing::Layout::kHeadMajor;
      auto data = testing::make_case_data(c, rng);
      AttentionProblem& p = data->problem;
      if (gated) p.gate = add_gate(*data, rng);
      testing::VsaReference ref = testing::reference_vsa(p, 3);
      auto layer = vsa_layer(p, 3);
      ASSERT_TRUE(layer.ok()) << layer.status().message();
      const Status s = layer->forward(p, nullptr);
      ASSERT_TRUE(s.ok()) << s.message();
      // The kernel's inputs are the stored elements, so the error is fp32 sums and out's rounding.
      const double tolerance = dtype == DType::kFloat32 ? 2e-5 : dtype == DType::kFloat16 ? 4e-3 : 3e-2;
      EXPECT_LE(testing::max_errors(p, ref.out).out, tolerance) << c.name() << " gate " << gated << " (seed " << seed << ")";
    }
}

TEST(FastvideoVsaCpu, RefusalsSayWhatToDoAndWriteNothing) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  const ParityCase c = video_case(DType::kBFloat16, {5, 6, 7});
  struct Bad {
    const char* what;
    std::optional<std::int64_t> topk;
    void (*apply)(AttentionProblem&);
    ErrorCode code;
    const char* message;
  };
  const Bad cases[] = {
      {"topk above the cubes", 9, [](AttentionProblem&) {}, ErrorCode::kInvalidInput, "choose a topk in 1..8"},
      {"no geometry", std::nullopt, [](AttentionProblem& p) { p.video.reset(); }, ErrorCode::kUnsupported,
       "AttentionProblem::video"},
      {"a geometry of other tokens", std::nullopt, [](AttentionProblem& p) { p.video = VideoGeometry{5, 6, 8}; },
       ErrorCode::kInvalidInput, "holds 240 tokens but q has 210"},
      {"a zero extent", std::nullopt, [](AttentionProblem& p) { p.video = VideoGeometry{0, 6, 7}; },
       ErrorCode::kInvalidInput, "every extent"},
      {"a gate of the wrong shape", std::nullopt, [](AttentionProblem& p) { p.gate = p.q, p.gate->shape[3] = 32; },
       ErrorCode::kInvalidInput, "gate must have shape"},
  };
  for (const Bad& bad : cases) {
    auto data = testing::make_case_data(c, rng);
    AttentionProblem call = data->problem;
    bad.apply(call);
    auto layer = vsa_layer(data->problem, bad.topk);
    ASSERT_TRUE(layer.ok()) << layer.status().message();
    const Status s = layer->forward(call, nullptr);
    EXPECT_EQ(s.code(), bad.code) << bad.what << ": " << s.message();
    EXPECT_THAT(s.message(), HasSubstr(bad.message)) << bad.what;
    EXPECT_EQ(testing::check_untouched(data->problem), "") << bad.what;
  }
  // topk <= 0 never reaches a call: the configuration refuses it.
  BackendInit init;
  init.spec = AttentionSpec{};
  init.spec->backend = "FASTVIDEO_VSA";
  init.spec->fastvideo_vsa_topk = 0;
  auto created = global_registry().create("FASTVIDEO_VSA", init);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(created.status().message(), HasSubstr("must be positive"));
}

TEST(FastvideoVsaCpu, OtherBackendsRefuseAGate) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  auto data = testing::make_case_data(video_case(DType::kBFloat16, {4, 4, 4}), rng);
  AttentionProblem& p = data->problem;
  p.gate = add_gate(*data, rng);
  const BackendDescriptor& sdpa = **global_registry().find("TORCH_SDPA");
  auto layer = testing::layer_for(sdpa, probe_cpu_platform(), p);
  ASSERT_TRUE(layer.ok());
  const Status s = layer->forward(p, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidInput);
  EXPECT_THAT(s.message(), HasSubstr("select FASTVIDEO_VSA"));
  EXPECT_EQ(testing::check_untouched(p), "");
}

TEST(FastvideoVsaBackend, RunsOnTheCpuAndOnAmpereToHopperWhereTheBuildHoldsItsKernels) {
  const BackendDescriptor& d = **global_registry().find("FASTVIDEO_VSA");
  EXPECT_FALSE(d.unavailable_reason(probe_cpu_platform()).has_value());
  PlatformInfo h200;
  h200.kind = PlatformKind::kCuda, h200.cc_major = 9, h200.cc_minor = 0;
  const auto reason = d.unavailable_reason(h200);  // a build without the CUDA kernels
  ASSERT_TRUE(reason.has_value());
  EXPECT_THAT(*reason, HasSubstr("block-sparse kernels"));
  h200.features.flash_attn = true;
  EXPECT_FALSE(d.unavailable_reason(h200).has_value());
  ASSERT_EQ(d.cuda.needs.size(), 1u);
  ASSERT_EQ(d.cuda.needs[0].archs.size(), 1u);
  EXPECT_EQ(d.cuda.needs[0].archs[0].min, 80);
  EXPECT_EQ(d.cuda.needs[0].archs[0].max, 90);
  EXPECT_TRUE(d.caps.needs_video_geometry);
  EXPECT_TRUE(d.caps.gate);
  ASSERT_EQ(d.kernels.size(), 2u);
  EXPECT_EQ(d.kernels[0].device, DeviceKind::kCpu);
  EXPECT_EQ(d.kernels[1].device, DeviceKind::kCuda);
}

TEST(FastvideoVsaBackend, CudaCallsNeedHalfPrecisionAndEqualHeadSizes) {
  const BackendDescriptor& d = **global_registry().find("FASTVIDEO_VSA");
  ProblemShape shape;
  shape.dtype = DType::kFloat32, shape.device = DeviceKind::kCuda;
  shape.seqlen_q = shape.seqlen_kv = 64, shape.heads_q = shape.heads_kv = 2;
  shape.head_size = 128, shape.head_size_v = 64;
  shape.video_geometry = true;
  EXPECT_THAT(d.unsupported_reasons(shape),
              ElementsAre(HasSubstr("float32 is not supported on CUDA tensors"),
                          HasSubstr("value head size must equal the query head size (got 64 and 128)")));
  shape.device = DeviceKind::kCpu;  // the CPU path takes both
  EXPECT_TRUE(d.unsupported_reasons(shape).empty());
  shape.device = DeviceKind::kCuda, shape.dtype = DType::kBFloat16, shape.head_size_v = 128;
  EXPECT_TRUE(d.unsupported_reasons(shape).empty());
}

}  // namespace
}  // namespace diffattn
