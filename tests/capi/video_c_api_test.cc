// The sparse video backends through the C interface: diffattn_layer_forward_ex carries a call's
// video geometry, layer index and gate; without the geometry the call is refused as one the
// backend cannot run (exit class 3) and nothing is written.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "capi/capi_testing.h"
#include "diffattn/c_api.h"
#include "kernels/cpu/vsa_cpu.h"
#include "parity/oracle.h"

namespace diffattn {
namespace {

using namespace capi_testing;

bool has(const char* text, const std::string& part) { return std::string(text).find(part) != std::string::npos; }

bool all_nan(const std::vector<float>& x) {
  for (float f : x)
    if (!std::isnan(f)) return false;
  return true;
}

// 3 x 6 x 8 tokens: 1 x 2 x 2 cubes of FASTVIDEO_VSA, two of them partial.
constexpr diffattn_video_geometry kVideo{3, 6, 8, 0, 0};
constexpr std::int64_t kTokens = 3 * 6 * 8;

TEST(CApiVideo, FastvideoVsaTakesItsGeometryAndGateThroughTheCall) {
  std::mt19937 rng = seeded_rng();
  Buffer q = random_buffer({1, kTokens, 2, 64}, rng), k = random_buffer({1, kTokens, 2, 64}, rng),
         v = random_buffer({1, kTokens, 2, 64}, rng), gate = random_buffer({1, kTokens, 2, 64}, rng),
         out = nan_buffer({1, kTokens, 2, 64});
  DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor(), tg = gate.tensor();

  // Every cube kept: dense attention (the gate then adds the coarse branch, checked below).
  Session all_cubes(R"({"per_role": {"self": {"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 4}}})");
  diffattn_layer_desc desc = layer_desc(2, 2, 64);
  Layer layer;
  ASSERT_EQ(diffattn_layer_create(all_cubes.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();

  // No geometry: refused with what to pass, out untouched.
  EXPECT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_UNSUPPORTED);
  EXPECT_TRUE(has(diffattn_last_error(), "geometry")) << diffattn_last_error();
  EXPECT_TRUE(all_nan(out.data));

  diffattn_call_extras extras;
  diffattn_call_extras_init(&extras);
  EXPECT_EQ(extras.layer_index, -1);
  EXPECT_EQ(extras.video, nullptr);
  extras.video = &kVideo;
  ASSERT_EQ(diffattn_layer_forward_ex(layer.l, &tq, &tk, &tv, &to, nullptr, nullptr, &extras, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
  AttentionProblem p;
  p.q = q.view(), p.k = k.view(), p.v = v.view(), p.out = out.view();
  const testing::OracleOutput dense = testing::reference_attention(p, testing::OraclePrecision::kFloat64);
  EXPECT_LT(rel_l2(out.data, dense.out), 1e-5);

  // With the gate: the CPU implementation's fine + coarse x gate on the same inputs.
  extras.gate = &tg;
  ASSERT_EQ(diffattn_layer_forward_ex(layer.l, &tq, &tk, &tv, &to, nullptr, nullptr, &extras, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
  Buffer want = nan_buffer({1, kTokens, 2, 64});
  AttentionProblem gated = p;
  gated.out = want.view();
  gated.video = VideoGeometry{kVideo.frames, kVideo.height, kVideo.width, 0, 0};
  gated.gate = gate.view();
  ASSERT_TRUE(run_fastvideo_vsa_cpu(gated, 4).ok());
  std::vector<double> want_d(want.data.begin(), want.data.end());
  EXPECT_LT(rel_l2(out.data, want_d), 1e-6);
  EXPECT_GT(rel_l2(out.data, dense.out), 1e-3) << "the gate changed nothing";
}

TEST(CApiVideo, BadGeometriesAreRefusedWithTheRange) {
  std::mt19937 rng = seeded_rng();
  Buffer q = random_buffer({1, kTokens, 2, 64}, rng), out = nan_buffer({1, kTokens, 2, 64});
  DLTensor tq = q.tensor(), to = out.tensor();
  Session session(R"({"per_role": {"self": {"backend": "FASTVIDEO_VSA"}}})");
  diffattn_layer_desc desc = layer_desc(2, 2, 64);
  Layer layer;
  ASSERT_EQ(diffattn_layer_create(session.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();
  diffattn_call_extras extras;
  diffattn_call_extras_init(&extras);
  const diffattn_video_geometry zero_width{3, 6, 0, 0, 0};
  extras.video = &zero_width;
  EXPECT_EQ(diffattn_layer_forward_ex(layer.l, &tq, &tq, &tq, &to, nullptr, nullptr, &extras, nullptr),
            DIFFATTN_INVALID_INPUT);
  EXPECT_TRUE(has(diffattn_last_error(), "positive frames, height and width")) << diffattn_last_error();
  // A geometry whose token count is not the call's.
  const diffattn_video_geometry larger{4, 6, 8, 0, 0};
  extras.video = &larger;
  EXPECT_EQ(diffattn_layer_forward_ex(layer.l, &tq, &tq, &tq, &to, nullptr, nullptr, &extras, nullptr),
            DIFFATTN_INVALID_INPUT);
  EXPECT_TRUE(all_nan(out.data));
  // NULL extras is a plain call.
  EXPECT_EQ(diffattn_layer_forward_ex(layer.l, &tq, &tq, &tq, &to, nullptr, nullptr, nullptr, nullptr),
            DIFFATTN_UNSUPPORTED);
  EXPECT_TRUE(has(diffattn_last_error(), "geometry")) << diffattn_last_error();
  std::printf("%s\n", diffattn_last_error());
}

}  // namespace
}  // namespace diffattn
