// Plugin libraries through the C interface: a plugin's backend runs only when named, checked
// against the float64 oracle; its failures reach the caller; loads that would shadow a name or
// register half a library are refused whole.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capi/capi_testing.h"
#include "diffattn/c_api.h"
#include "diffattn/problem.h"
#include "parity/oracle.h"

namespace diffattn {
namespace {

using namespace capi_testing;

constexpr const char* kPlugin = DIFFATTN_TEST_PLUGIN_PATH;
constexpr const char* kNaiveConfig = R"({"default": {"backend": "TEST_NAIVE_ATTN"}})";

// The plugin's own count of forward calls, read from the loaded library.
int plugin_calls() {
  void* handle = dlopen(kPlugin, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return -1;
  auto fn = reinterpret_cast<int (*)()>(dlsym(handle, "diffattn_test_plugin_calls"));
  const int calls = fn != nullptr ? fn() : -1;
  dlclose(handle);
  return calls;
}

std::string load(diffattn_session* s, diffattn_code expected) {
  char* names = nullptr;
  const diffattn_code code = diffattn_session_load_plugin(s, kPlugin, &names);
  EXPECT_EQ(code, expected) << diffattn_code_name(code) << ": " << diffattn_last_error();
  std::string text = names != nullptr ? names : "";
  diffattn_string_free(names);
  return text;
}

struct PluginMode {
  explicit PluginMode(const char* mode) { setenv("DIFFATTN_TEST_PLUGIN_MODE", mode, 1); }
  ~PluginMode() { unsetenv("DIFFATTN_TEST_PLUGIN_MODE"); }
};

TEST(CApiPlugin, NamedPluginBackendRunsAndMatchesTheOracle) {
  std::mt19937 rng = seeded_rng();
  const int B = 2, Sq = 21, Skv = 30, H = 4, Hkv = 2, D = 16;
  Session session(kNaiveConfig);
  diffattn_layer_desc desc = layer_desc(H, Hkv, D);
  desc.causal = 1;
  Layer layer;
  // Before the load the name is unknown; the refusal is not cached past the load.
  EXPECT_EQ(diffattn_layer_create(session.s, &desc, &layer.l), DIFFATTN_UNKNOWN_BACKEND);
  EXPECT_EQ(load(session.s, DIFFATTN_OK), R"(["TEST_NAIVE_ATTN","TEST_REFUSING_ATTN"])");
  ASSERT_EQ(diffattn_layer_create(session.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();
  EXPECT_STREQ(diffattn_layer_backend(layer.l), "TEST_NAIVE_ATTN");
  diffattn_session_destroy(session.s);  // the layer keeps the library loaded
  session.s = nullptr;

  Buffer q = random_buffer({B, Sq, H, D}, rng), k = random_buffer({B, Skv, Hkv, D}, rng),
         v = random_buffer({B, Skv, Hkv, D}, rng);
  Buffer out = nan_buffer({B, Sq, H, D}), lse = nan_buffer({B, H, Sq});
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(B * Skv), 1);
  for (int j = 0; j < Skv; j += 3) keep[static_cast<std::size_t>(Skv + j)] = 0;  // batch 1 drops every third key
  std::vector<std::int64_t> mask_shape = {B, Skv};
  const DLTensor mask = bool_tensor(keep, mask_shape);
  DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor(), tl = lse.tensor();
  const int calls = plugin_calls();
  ASSERT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &to, &mask, &tl, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
  EXPECT_EQ(plugin_calls(), calls + 1);  // the plugin ran the call, nothing else did

  AttentionProblem p;
  p.q = q.view(), p.k = k.view(), p.v = v.view(), p.out = out.view();
  p.mask = from_dlpack(mask).value();
  p.causal = true;
  const testing::OracleOutput want = testing::reference_attention(p, testing::OraclePrecision::kFloat64);
  EXPECT_LT(rel_l2(out.data, want.out), 1e-6);
  // Batch 1's first row keeps no key (causal, and its key 0 is dropped): LSE -inf, output 0.
  EXPECT_EQ(want.lse[static_cast<std::size_t>(1 * H * Sq)], -INFINITY);
  for (std::size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) EXPECT_EQ(lse.data[i], want.lse[i]) << i;
    else EXPECT_NEAR(lse.data[i], want.lse[i], 1e-4) << i;
  }
}

TEST(CApiPlugin, PluginFailuresAndCapabilityRefusalsLeaveTheOutputUntouched) {
  std::mt19937 rng = seeded_rng();
  Session session(R"({"default": {"backend": "TEST_NAIVE_ATTN"}, "per_role": {"cross": {"backend": "TEST_REFUSING_ATTN"}}})");
  load(session.s, DIFFATTN_OK);
  Buffer q = random_buffer({1, 8, 2, 16}, rng), k = random_buffer({1, 8, 2, 16}, rng), v = random_buffer({1, 8, 2, 16}, rng);
  Buffer out = random_buffer({1, 8, 2, 16}, rng);
  const std::vector<float> before = out.data;
  DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor();

  diffattn_layer_desc desc = layer_desc(2, 0, 16);
  desc.role = "cross";
  Layer refusing;
  ASSERT_EQ(diffattn_layer_create(session.s, &desc, &refusing.l), DIFFATTN_OK) << diffattn_last_error();
  EXPECT_EQ(diffattn_layer_forward(refusing.l, &tq, &tk, &tv, &to, nullptr, nullptr, nullptr), DIFFATTN_UNSUPPORTED);
  const std::string message = diffattn_last_error();
  EXPECT_NE(message.find("refuses every call"), std::string::npos) << message;
  EXPECT_NE(message.find(kPlugin), std::string::npos) << message;
  EXPECT_EQ(out.data, before);

  desc.role = "self";
  Layer naive;
  ASSERT_EQ(diffattn_layer_create(session.s, &desc, &naive.l), DIFFATTN_OK) << diffattn_last_error();
  const int calls = plugin_calls();
  // A dense mask is outside what the plugin declared: refused before the plugin is called.
  std::vector<std::uint8_t> dense(8 * 8, 1);
  std::vector<std::int64_t> dense_shape = {1, 1, 8, 8};
  const DLTensor mask = bool_tensor(dense, dense_shape);
  EXPECT_EQ(diffattn_layer_forward(naive.l, &tq, &tk, &tv, &to, &mask, nullptr, nullptr), DIFFATTN_UNSUPPORTED);
  EXPECT_NE(std::string(diffattn_last_error()).find("TEST_NAIVE_ATTN"), std::string::npos) << diffattn_last_error();
  // So are half-precision inputs.
  std::vector<std::uint16_t> half(q.data.size(), 0x3c00);
  DLTensor hq = tq;
  hq.data = half.data();
  hq.dtype = {kDLFloat, 16, 1};
  DLTensor hk = hq, hv = hq;
  std::vector<std::uint16_t> half_out(q.data.size(), 0x7e00);
  DLTensor ho = hq;
  ho.data = half_out.data();
  EXPECT_EQ(diffattn_layer_forward(naive.l, &hq, &hk, &hv, &ho, nullptr, nullptr, nullptr), DIFFATTN_UNSUPPORTED);
  EXPECT_EQ(half_out, std::vector<std::uint16_t>(q.data.size(), 0x7e00));
  EXPECT_EQ(plugin_calls(), calls);
  EXPECT_EQ(out.data, before);
}

TEST(CApiPlugin, LoadsAreAllOrNothingAndNeverShadowANamedBackend) {
  Session session(kNaiveConfig);
  {
    PluginMode mode("shadow");
    load(session.s, DIFFATTN_INVALID_CONFIG);
    EXPECT_NE(std::string(diffattn_last_error()).find("shadows the built-in backend FLASH_ATTN"), std::string::npos)
        << diffattn_last_error();
  }
  {
    PluginMode mode("partial");
    load(session.s, DIFFATTN_INVALID_CONFIG);
    EXPECT_NE(std::string(diffattn_last_error()).find("no forward function"), std::string::npos) << diffattn_last_error();
  }
  {
    PluginMode mode("refuse");
    load(session.s, DIFFATTN_INVALID_CONFIG);
    EXPECT_NE(std::string(diffattn_last_error()).find("ABI version 1"), std::string::npos) << diffattn_last_error();
  }
  // None of those added a name, so a good load takes both; a second one finds them taken.
  EXPECT_EQ(load(session.s, DIFFATTN_OK), R"(["TEST_NAIVE_ATTN","TEST_REFUSING_ATTN"])");
  load(session.s, DIFFATTN_INVALID_CONFIG);
  EXPECT_NE(std::string(diffattn_last_error()).find("already registered by the plugin"), std::string::npos)
      << diffattn_last_error();

  char* names = nullptr;
  EXPECT_EQ(diffattn_session_load_plugin(session.s, "/no/such/plugin.so", &names), DIFFATTN_UNAVAILABLE);
  EXPECT_EQ(names, nullptr);
  EXPECT_NE(std::string(diffattn_last_error()).find("/no/such/plugin.so"), std::string::npos) << diffattn_last_error();
  EXPECT_EQ(diffattn_session_load_plugin(session.s, "libm.so.6", nullptr), DIFFATTN_INVALID_CONFIG);
  EXPECT_NE(std::string(diffattn_last_error()).find("is not a diffattn plugin"), std::string::npos)
      << diffattn_last_error();

  // Plugins belong to the session that loaded them.
  Session other(kNaiveConfig);
  diffattn_layer_desc desc = layer_desc(2, 0, 16);
  diffattn_layer* layer = nullptr;
  EXPECT_EQ(diffattn_layer_create(other.s, &desc, &layer), DIFFATTN_UNKNOWN_BACKEND);
  EXPECT_EQ(layer, nullptr);
}

TEST(CApiPlugin, PluginBackendsAreNeverDefaults) {
  Session session(nullptr);
  load(session.s, DIFFATTN_OK);
  char* text = nullptr;
  ASSERT_EQ(diffattn_resolve(session.s, "self", nullptr, 64, 0, &text), DIFFATTN_OK) << diffattn_last_error();
  const auto resolution = nlohmann::json::parse(text);
  diffattn_string_free(text);
  if (std::getenv("DIFFUSION_ATTENTION_BACKEND") == nullptr) {
    EXPECT_EQ(resolution.at("backend"), "TORCH_SDPA");
    EXPECT_EQ(resolution.at("source"), "platform");
  }
}

}  // namespace
}  // namespace diffattn
