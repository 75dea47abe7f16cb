// The C interface: selection, calls against the float64 oracle, and errors that leave caller
// memory untouched. Runs on the CPU platform, so it runs everywhere.

#include "diffattn/c_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capi/c_api_usage.h"
#include "capi/capi_testing.h"
#include "diffattn/problem.h"
#include "parity/oracle.h"

namespace diffattn {
namespace {

using testing::OracleOutput;
using testing::OraclePrecision;
using testing::reference_attention;
using namespace capi_testing;

constexpr const char* kSdpaConfig = R"({"default": {"backend": "TORCH_SDPA"}})";

TEST(CApi, ForwardWithGqaCausalMaskAndLseMatchesTheOracle) {
  std::mt19937 rng = seeded_rng();
  const int B = 2, Sq = 37, Skv = 45, H = 4, Hkv = 2, D = 32;
  Buffer q = random_buffer({B, Sq, H, D}, rng), k = random_buffer({B, Skv, Hkv, D}, rng),
         v = random_buffer({B, Skv, Hkv, D}, rng);
  Buffer out = nan_buffer({B, Sq, H, D}), lse = nan_buffer({B, H, Sq});
  // Key padding: batch 0 keeps every key, batch 1 drops its last 9.
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(B * Skv), 1);
  for (int j = Skv - 9; j < Skv; ++j) keep[static_cast<std::size_t>(Skv + j)] = 0;
  std::vector<std::int64_t> mask_shape = {B, Skv};
  const DLTensor mask = bool_tensor(keep, mask_shape);

  Session session(kSdpaConfig);
  diffattn_layer_desc desc = layer_desc(H, Hkv, D);
  desc.causal = 1;
  desc.has_scale = 1;
  desc.scale = 0.3f;
  Layer layer;
  ASSERT_EQ(diffattn_layer_create(session.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();
  EXPECT_STREQ(diffattn_layer_backend(layer.l), "TORCH_SDPA");

  DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor(), tl = lse.tensor();
  ASSERT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &to, &mask, &tl, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
  EXPECT_STREQ(diffattn_last_error(), "");

  AttentionProblem p;
  p.q = q.view(), p.k = k.view(), p.v = v.view(), p.out = out.view();
  p.mask = from_dlpack(mask).value();
  p.scale = 0.3f;
  p.causal = true;
  const OracleOutput want = reference_attention(p, OraclePrecision::kFloat64);
  EXPECT_LT(rel_l2(out.data, want.out), 1e-5);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < Sq; ++i) {
        const float got = lse.data[static_cast<std::size_t>((b * H + h) * Sq + i)];
        EXPECT_NEAR(got, want.lse[static_cast<std::size_t>((b * H + h) * Sq + i)], 1e-4) << b << " " << h << " " << i;
      }
}

TEST(CApi, CallsFromCMatchTheOracle) {
  std::mt19937 rng = seeded_rng();
  const int B = 1, S = 50, H = 3, D = 64;
  Buffer q = random_buffer({B, S, H, D}, rng), k = random_buffer({B, S, H, D}, rng), v = random_buffer({B, S, H, D}, rng);
  Buffer out = nan_buffer({B, S, H, D});
  char backend[32] = {};
  ASSERT_EQ(diffattn_c_usage_forward(kSdpaConfig, q.data.data(), k.data.data(), v.data.data(), out.data.data(), B, S, S,
                                     H, D, 0, backend, sizeof backend),
            DIFFATTN_OK)
      << diffattn_last_error();
  EXPECT_STREQ(backend, "TORCH_SDPA");
  AttentionProblem p;
  p.q = q.view(), p.k = k.view(), p.v = v.view(), p.out = out.view();
  EXPECT_LT(rel_l2(out.data, reference_attention(p, OraclePrecision::kFloat64).out), 1e-5);
}

TEST(CApi, ResolveReportsBackendAndSourcePerRole) {
  Session session(R"({"per_role": {"cross": {"backend": "TORCH_SDPA"}}})");
  char* text = nullptr;
  ASSERT_EQ(diffattn_resolve(session.s, "cross", nullptr, 128, 0, &text), DIFFATTN_OK) << diffattn_last_error();
  const auto cross = nlohmann::json::parse(text);
  diffattn_string_free(text);
  EXPECT_EQ(cross.at("backend"), "TORCH_SDPA");
  EXPECT_EQ(cross.at("source"), "per_role");
  EXPECT_EQ(cross.at("head_size"), 128);

  text = nullptr;
  ASSERT_EQ(diffattn_resolve(session.s, "self", "video", 64, 0, &text), DIFFATTN_OK) << diffattn_last_error();
  const auto self = nlohmann::json::parse(text);
  diffattn_string_free(text);
  EXPECT_EQ(self.at("source"), "platform");
  EXPECT_EQ(self.at("backend"), "TORCH_SDPA");  // the only default on the CPU
  EXPECT_TRUE(self.at("spec").is_null());
}

TEST(CApi, ConfigurationErrorsSayWhatIsWrongAndCreateNothing) {
  diffattn_session* session = nullptr;
  EXPECT_EQ(diffattn_session_create("cpu", "{\"default\": ", &session), DIFFATTN_INVALID_CONFIG);
  EXPECT_EQ(session, nullptr);
  EXPECT_STRNE(diffattn_last_error(), "");

  EXPECT_EQ(diffattn_session_create("no-such-platform.json", nullptr, &session), DIFFATTN_INVALID_CONFIG);
  EXPECT_EQ(session, nullptr);
  EXPECT_NE(std::string(diffattn_last_error()).find("no-such-platform.json"), std::string::npos)
      << diffattn_last_error();

  // Names are checked against the registry when a layer resolves its backend.
  Session s(R"({"default": {"backend": "NO_SUCH_BACKEND"}})");
  const diffattn_layer_desc desc = layer_desc(2, 0, 64);
  diffattn_layer* layer = nullptr;
  EXPECT_EQ(diffattn_layer_create(s.s, &desc, &layer), DIFFATTN_UNKNOWN_BACKEND);
  EXPECT_EQ(layer, nullptr);
  EXPECT_NE(std::string(diffattn_last_error()).find("NO_SUCH_BACKEND"), std::string::npos) << diffattn_last_error();
  EXPECT_STREQ(diffattn_code_name(DIFFATTN_UNKNOWN_BACKEND), "unknown_backend");
}

TEST(CApi, ExplicitGpuBackendOnTheCpuIsRefusedNotSwapped) {
  Session s(R"({"default": {"backend": "FLASH_ATTN"}})");
  const diffattn_layer_desc desc = layer_desc(8, 0, 128);
  diffattn_layer* layer = nullptr;
  const diffattn_code code = diffattn_layer_create(s.s, &desc, &layer);
  EXPECT_TRUE(code == DIFFATTN_UNSUPPORTED || code == DIFFATTN_UNAVAILABLE) << diffattn_code_name(code);
  EXPECT_EQ(layer, nullptr);
  EXPECT_NE(std::string(diffattn_last_error()).find("FLASH_ATTN"), std::string::npos) << diffattn_last_error();
}

TEST(CApi, BadCallsLeaveTheOutputUntouched) {
  std::mt19937 rng = seeded_rng();
  Session s(kSdpaConfig);
  const diffattn_layer_desc desc = layer_desc(4, 0, 16);
  Layer layer;
  ASSERT_EQ(diffattn_layer_create(s.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();

  Buffer q = random_buffer({1, 8, 4, 16}, rng), k = random_buffer({1, 8, 4, 16}, rng), v = random_buffer({1, 8, 4, 16}, rng);
  Buffer out = random_buffer({1, 8, 4, 16}, rng);
  const std::vector<float> before = out.data;
  DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor();

  // Heads the layer does not declare (a valid GQA call, but not this layer's).
  Buffer k2 = random_buffer({1, 8, 2, 16}, rng), v2 = random_buffer({1, 8, 2, 16}, rng);
  DLTensor tk2 = k2.tensor(), tv2 = v2.tensor();
  EXPECT_EQ(diffattn_layer_forward(layer.l, &tq, &tk2, &tv2, &to, nullptr, nullptr, nullptr), DIFFATTN_INVALID_INPUT);
  EXPECT_NE(std::string(diffattn_last_error()).find("heads"), std::string::npos) << diffattn_last_error();
  // Missing tensors.
  EXPECT_EQ(diffattn_layer_forward(layer.l, &tq, nullptr, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_INVALID_INPUT);
  EXPECT_NE(std::string(diffattn_last_error()).find("k must not be NULL"), std::string::npos) << diffattn_last_error();
  // Vector lanes.
  DLTensor lanes = tq;
  lanes.dtype.lanes = 2;
  EXPECT_EQ(diffattn_layer_forward(layer.l, &lanes, &tk, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_INVALID_INPUT);
  EXPECT_NE(std::string(diffattn_last_error()).find("q:"), std::string::npos) << diffattn_last_error();
  // Output of the wrong shape.
  Buffer small = random_buffer({1, 7, 4, 16}, rng);
  const std::vector<float> small_before = small.data;
  DLTensor ts = small.tensor();
  EXPECT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &ts, nullptr, nullptr, nullptr), DIFFATTN_INVALID_INPUT);
  EXPECT_EQ(small.data, small_before);
  EXPECT_EQ(out.data, before);

  // A good call afterwards works and clears the message.
  EXPECT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
  EXPECT_STREQ(diffattn_last_error(), "");
  EXPECT_NE(out.data, before);
}

TEST(CApi, NullArgumentsAreErrorsNotCrashes) {
  diffattn_layer_desc desc;
  diffattn_layer_desc_init(&desc);
  EXPECT_STREQ(desc.role, "self");
  EXPECT_EQ(diffattn_session_create("cpu", nullptr, nullptr), DIFFATTN_INVALID_INPUT);
  EXPECT_EQ(diffattn_layer_create(nullptr, &desc, nullptr), DIFFATTN_INVALID_INPUT);
  char* text = nullptr;
  EXPECT_EQ(diffattn_resolve(nullptr, "self", nullptr, 64, 0, &text), DIFFATTN_INVALID_INPUT);
  EXPECT_EQ(text, nullptr);
  EXPECT_EQ(diffattn_layer_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
            DIFFATTN_INVALID_INPUT);
  diffattn_session_destroy(nullptr);
  diffattn_layer_destroy(nullptr);
  EXPECT_STREQ(diffattn_layer_backend(nullptr), "");
  EXPECT_STREQ(diffattn_version(), "0.1.0");
}

}  // namespace
}  // namespace diffattn
