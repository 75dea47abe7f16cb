// The C interface: selection, calls against the float64 oracle, and errors that leave caller
// memory untouched. Runs on the CPU platform, so it runs everywhere.

#include "diffattn/c_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capi/c_api_usage.h"
#include "diffattn/problem.h"
#include "parity/oracle.h"

namespace diffattn {
namespace {

using testing::OracleOutput;
using testing::OraclePrecision;
using testing::reference_attention;

constexpr const char* kSdpaConfig = R"({"default": {"backend": "TORCH_SDPA"}})";

struct Buffer {
  std::vector<float> data;
  std::vector<std::int64_t> shape;
  DLTensor tensor() {
    DLTensor t{};
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<std::int32_t>(shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape.data();
    t.strides = nullptr;
    return t;
  }
};

// Fresh random values for every run (the seed is printed, so a failure can be replayed).
Buffer random_buffer(std::vector<std::int64_t> shape, std::mt19937& rng) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Buffer b{std::vector<float>(static_cast<std::size_t>(n)), std::move(shape)};
  for (float& x : b.data) x = u(rng);
  return b;
}

std::mt19937 seeded_rng() {
  const unsigned seed = std::random_device{}();
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("seed %u\n", seed);
  return std::mt19937(seed);
}

TensorView view_of(Buffer& b) { return from_dlpack(b.tensor()).value(); }

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

struct Session {
  diffattn_session* s = nullptr;
  ~Session() { diffattn_session_destroy(s); }
};

struct Layer {
  diffattn_layer* l = nullptr;
  ~Layer() { diffattn_layer_destroy(l); }
};

TEST(CApi, ForwardWithGqaCausalMaskAndLseMatchesTheOracle) {
  std::mt19937 rng = seeded_rng();
  const int B = 2, Sq = 37, Skv = 45, H = 4, Hkv = 2, D = 32;
  Buffer q = random_buffer({B, Sq, H, D}, rng), k = random_buffer({B, Skv, Hkv, D}, rng),
         v = random_buffer({B, Skv, Hkv, D}, rng);
  Buffer out{std::vector<float>(static_cast<std::size_t>(B * Sq * H * D), std::nanf("")), {B, Sq, H, D}};
  Buffer lse{std::vector<float>(static_cast<std::size_t>(B * H * Sq), std::nanf("")), {B, H, Sq}};
  // Key padding: batch 0 keeps every key, batch 1 drops its last 9.
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(B * Skv), 1);
  for (int j = Skv - 9; j < Skv; ++j) keep[static_cast<std::size_t>(Skv + j)] = 0;
  std::int64_t mask_shape[2] = {B, Skv};
  DLTensor mask{};
  mask.data = keep.data();
  mask.device = {kDLCPU, 0};
  mask.ndim = 2;
  mask.dtype = {kDLUInt, 8, 1};
  mask.shape = mask_shape;

  Session session;
  ASSERT_EQ(diffattn_session_create("cpu", kSdpaConfig, &session.s), DIFFATTN_OK) << diffattn_last_error();
  diffattn_layer_desc desc;
  diffattn_layer_desc_init(&desc);
  desc.num_heads = H;
  desc.num_kv_heads = Hkv;
  desc.head_size = D;
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
  p.q = view_of(q), p.k = view_of(k), p.v = view_of(v), p.out = view_of(out);
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
  Buffer out{std::vector<float>(static_cast<std::size_t>(B * S * H * D), std::nanf("")), {B, S, H, D}};
  char backend[32] = {};
  ASSERT_EQ(diffattn_c_usage_forward(kSdpaConfig, q.data.data(), k.data.data(), v.data.data(), out.data.data(), B, S, S,
                                     H, D, 0, backend, sizeof backend),
            DIFFATTN_OK)
      << diffattn_last_error();
  EXPECT_STREQ(backend, "TORCH_SDPA");
  AttentionProblem p;
  p.q = view_of(q), p.k = view_of(k), p.v = view_of(v), p.out = view_of(out);
  EXPECT_LT(rel_l2(out.data, reference_attention(p, OraclePrecision::kFloat64).out), 1e-5);
}

TEST(CApi, ResolveReportsBackendAndSourcePerRole) {
  Session session;
  ASSERT_EQ(diffattn_session_create("cpu", R"({"per_role": {"cross": {"backend": "TORCH_SDPA"}}})", &session.s),
            DIFFATTN_OK)
      << diffattn_last_error();
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
  Session s;
  ASSERT_EQ(diffattn_session_create("cpu", R"({"default": {"backend": "NO_SUCH_BACKEND"}})", &s.s), DIFFATTN_OK)
      << diffattn_last_error();
  diffattn_layer_desc desc;
  diffattn_layer_desc_init(&desc);
  desc.num_heads = 2;
  desc.head_size = 64;
  diffattn_layer* layer = nullptr;
  EXPECT_EQ(diffattn_layer_create(s.s, &desc, &layer), DIFFATTN_UNKNOWN_BACKEND);
  EXPECT_EQ(layer, nullptr);
  EXPECT_NE(std::string(diffattn_last_error()).find("NO_SUCH_BACKEND"), std::string::npos) << diffattn_last_error();
  EXPECT_STREQ(diffattn_code_name(DIFFATTN_UNKNOWN_BACKEND), "unknown_backend");
}

TEST(CApi, ExplicitGpuBackendOnTheCpuIsRefusedNotSwapped) {
  Session s;
  ASSERT_EQ(diffattn_session_create("cpu", R"({"default": {"backend": "FLASH_ATTN"}})", &s.s), DIFFATTN_OK)
      << diffattn_last_error();
  diffattn_layer_desc desc;
  diffattn_layer_desc_init(&desc);
  desc.num_heads = 8;
  desc.head_size = 128;
  diffattn_layer* layer = nullptr;
  const diffattn_code code = diffattn_layer_create(s.s, &desc, &layer);
  EXPECT_TRUE(code == DIFFATTN_UNSUPPORTED || code == DIFFATTN_UNAVAILABLE) << diffattn_code_name(code);
  EXPECT_EQ(layer, nullptr);
  EXPECT_NE(std::string(diffattn_last_error()).find("FLASH_ATTN"), std::string::npos) << diffattn_last_error();
}

TEST(CApi, BadCallsLeaveTheOutputUntouched) {
  std::mt19937 rng = seeded_rng();
  Session s;
  ASSERT_EQ(diffattn_session_create("cpu", kSdpaConfig, &s.s), DIFFATTN_OK) << diffattn_last_error();
  diffattn_layer_desc desc;
  diffattn_layer_desc_init(&desc);
  desc.num_heads = 4;
  desc.head_size = 16;
  Layer layer;
  ASSERT_EQ(diffattn_layer_create(s.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();

  Buffer q = random_buffer({1, 8, 4, 16}, rng), k = random_buffer({1, 8, 4, 16}, rng), v = random_buffer({1, 8, 4, 16}, rng);
  Buffer out = random_buffer({1, 8, 4, 16}, rng);
  const std::vector<float> before = out.data;
  DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor();

  // Heads the layer does not declare.
  Buffer k3 = random_buffer({1, 8, 3, 16}, rng);
  DLTensor tk3 = k3.tensor();
  EXPECT_EQ(diffattn_layer_forward(layer.l, &tq, &tk3, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_INVALID_INPUT);
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
