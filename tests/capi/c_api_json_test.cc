// The C interface's JSON views: configuration normalised by the core (the rules bindings rely on
// instead of keeping their own), the session's configuration and platform, a layer's resolution,
// exit-code classes, and DLPack 0.8 bool masks.

#include "diffattn/c_api.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capi/capi_testing.h"

namespace diffattn {
namespace {

using namespace capi_testing;
using nlohmann::json;

// The JSON a call returned through out_json (read after the call: `text` is a reference), released.
json take_json(diffattn_code code, char*& text) {
  EXPECT_EQ(code, DIFFATTN_OK) << diffattn_last_error();
  if (text == nullptr) return json();
  json value = json::parse(text);
  diffattn_string_free(text);
  text = nullptr;
  return value;
}

constexpr const char* kHopper =
    R"({"kind": "cuda", "compute_capability": "9.0", "device_name": "H200", "cudnn_version": "9.5.0",
        "features": {"flash_attn": true}})";

TEST(CApiJson, ExitCodesFollowTheCommandLineClasses) {
  EXPECT_EQ(diffattn_exit_code(DIFFATTN_OK), 0);
  EXPECT_EQ(diffattn_exit_code(DIFFATTN_INVALID_CONFIG), 2);
  EXPECT_EQ(diffattn_exit_code(DIFFATTN_UNKNOWN_BACKEND), 2);
  EXPECT_EQ(diffattn_exit_code(DIFFATTN_INVALID_INPUT), 2);
  EXPECT_EQ(diffattn_exit_code(DIFFATTN_UNSUPPORTED), 3);
  EXPECT_EQ(diffattn_exit_code(DIFFATTN_UNAVAILABLE), 3);
  EXPECT_EQ(diffattn_exit_code(DIFFATTN_CUDA_ERROR), 1);
  EXPECT_EQ(diffattn_exit_code(DIFFATTN_INTERNAL), 1);
  EXPECT_EQ(diffattn_exit_code(99), 1);
}

TEST(CApiJson, NormaliseDropsAutoFillsDefaultsAndReadsBack) {
  char* text = nullptr;
  const json config = take_json(
      diffattn_config_normalise(
          R"({"default": "auto", "per_role": {"cross": "TORCH_SDPA", "self": {"backend": "RAINFUSION_ATTN"}}})", &text),
      text);
  EXPECT_TRUE(config.at("default").is_null());
  EXPECT_EQ(config.at("per_role").at("cross").at("backend"), "TORCH_SDPA");
  // RainFusion's block_sparse defaults are filled in by the core.
  EXPECT_TRUE(config.at("per_role").at("self").at("block_sparse").is_object()) << config.dump();
  // The normalised form is itself a valid configuration that normalises to itself.
  char* again = nullptr;
  EXPECT_EQ(take_json(diffattn_config_normalise(config.dump().c_str(), &again), again), config);
}

TEST(CApiJson, NormaliseRefusesWithTheSessionsCodeAndMessage) {
  const std::string bad = R"({"default": {"backend": "TRTLLM_ATTN", "skip_softmax": {"threshold": -1}}})";
  char* text = nullptr;
  const diffattn_code code = diffattn_config_normalise(bad.c_str(), &text);
  const std::string message = diffattn_last_error();
  EXPECT_EQ(code, DIFFATTN_INVALID_CONFIG);
  EXPECT_EQ(text, nullptr);
  EXPECT_NE(message.find("threshold"), std::string::npos) << message;
  diffattn_session* session = nullptr;
  EXPECT_EQ(diffattn_session_create("cpu", bad.c_str(), &session), code);
  EXPECT_EQ(session, nullptr);
  EXPECT_EQ(std::string(diffattn_last_error()), message);
}

TEST(CApiJson, SpecNormaliseNamesTheFieldAndMapsAutoToNull) {
  char* text = nullptr;
  EXPECT_EQ(take_json(diffattn_spec_normalise(R"("FLASH_ATTN")", "default", &text), text).at("backend"), "FLASH_ATTN");
  EXPECT_TRUE(take_json(diffattn_spec_normalise(R"("Auto")", "default", &text), text).is_null());
  text = nullptr;
  EXPECT_EQ(diffattn_spec_normalise(R"({"backend": "TORCH_SDPA", "quant": {"dtype_vo": "fp8_e4m3"}})",
                                    "per_role['cross']", &text),
            DIFFATTN_INVALID_CONFIG);
  EXPECT_EQ(text, nullptr);
  const std::string message = diffattn_last_error();
  EXPECT_NE(message.find("per_role['cross']"), std::string::npos) << message;
  EXPECT_NE(message.find("quant"), std::string::npos) << message;
  EXPECT_EQ(diffattn_spec_normalise(nullptr, "x", &text), DIFFATTN_INVALID_INPUT);
}

TEST(CApiJson, SessionConfigShowsTheEnvironmentDefault) {
  const char* before = std::getenv("DIFFUSION_ATTENTION_BACKEND");
  const std::string saved = before != nullptr ? before : "";
  setenv("DIFFUSION_ATTENTION_BACKEND", "TORCH_SDPA", 1);
  diffattn_session* session = nullptr;
  const diffattn_code created =
      diffattn_session_create("cpu", R"({"per_role": {"cross": {"backend": "TORCH_SDPA"}}})", &session);
  if (before != nullptr) setenv("DIFFUSION_ATTENTION_BACKEND", saved.c_str(), 1);
  else unsetenv("DIFFUSION_ATTENTION_BACKEND");
  ASSERT_EQ(created, DIFFATTN_OK) << diffattn_last_error();
  char* text = nullptr;
  const json config = take_json(diffattn_session_config(session, &text), text);
  diffattn_session_destroy(session);
  EXPECT_EQ(config.at("default").at("backend"), "TORCH_SDPA");
  EXPECT_EQ(config.at("per_role").at("cross").at("backend"), "TORCH_SDPA");
}

TEST(CApiJson, AnInlineDescriptionIsThePlatformAndReadsBackUnchanged) {
  diffattn_session* session = nullptr;
  ASSERT_EQ(diffattn_session_create(kHopper, nullptr, &session), DIFFATTN_OK) << diffattn_last_error();
  char* text = nullptr;
  char* description = nullptr;
  ASSERT_EQ(diffattn_session_platform(session, &text, &description), DIFFATTN_OK) << diffattn_last_error();
  const json platform = json::parse(text);
  diffattn_string_free(text);
  EXPECT_NE(std::string(description).find("H200"), std::string::npos) << description;
  diffattn_string_free(description);
  EXPECT_EQ(platform.at("kind"), "cuda");
  EXPECT_EQ(platform.at("compute_capability"), "9.0");
  EXPECT_EQ(platform.at("origin"), "description");
  // Hopper's route starts with FLASH_ATTN when the description says its kernels exist.
  char* resolved = nullptr;
  EXPECT_EQ(take_json(diffattn_resolve(session, "self", nullptr, 128, 0, &resolved), resolved).at("backend"),
            "FLASH_ATTN");
  diffattn_session_destroy(session);

  // What a session reports is a description another session accepts, describing the same platform.
  diffattn_session* again = nullptr;
  ASSERT_EQ(diffattn_session_create(platform.dump().c_str(), nullptr, &again), DIFFATTN_OK) << diffattn_last_error();
  EXPECT_EQ(take_json(diffattn_session_platform(again, &text, nullptr), text), platform);
  diffattn_session_destroy(again);
  again = nullptr;

  EXPECT_EQ(diffattn_session_create(R"({"kind": "tpu"})", nullptr, &again), DIFFATTN_INVALID_CONFIG);
  EXPECT_EQ(again, nullptr);
  EXPECT_NE(std::string(diffattn_last_error()).find("platform description"), std::string::npos)
      << diffattn_last_error();
}

TEST(CApiJson, LayerResolutionIsTheResolveAnswerForItsRole) {
  Session s(R"({"per_role": {"cross": {"backend": "TORCH_SDPA"}}})");
  diffattn_layer_desc desc = layer_desc(4, 0, 64);
  desc.role = "wan.cross";
  desc.category = "cross";
  Layer layer;
  ASSERT_EQ(diffattn_layer_create(s.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();
  char* text = nullptr;
  const json from_layer = take_json(diffattn_layer_resolution(layer.l, &text), text);
  EXPECT_EQ(take_json(diffattn_resolve(s.s, "wan.cross", "cross", 64, 0, &text), text), from_layer);
  EXPECT_EQ(from_layer.at("source"), "category");
  EXPECT_EQ(diffattn_layer_resolution(nullptr, &text), DIFFATTN_INVALID_INPUT);
}

TEST(CApiJson, ATuningRecordFromAnotherPlatformGivesAWarning) {
  const std::string dir = ::testing::TempDir() + "diffattn_tuning_" + std::to_string(std::random_device{}());
  std::filesystem::create_directories(dir);
  const std::string config_path = dir + "/cfg.json";
  diffattn_session* session = nullptr;
  ASSERT_EQ(diffattn_session_create(kHopper, nullptr, &session), DIFFATTN_OK) << diffattn_last_error();
  char* text = nullptr;
  const json platform = take_json(diffattn_session_platform(session, &text, nullptr), text);
  auto warning_for = [&](const json& tuned_on) {
    std::ofstream(dir + "/cfg.tuning.json") << json{{"tuned_on", tuned_on}, {"description", "somewhere"}}.dump();
    char* warning = nullptr;
    EXPECT_EQ(diffattn_session_tuning_warning(session, config_path.c_str(), &warning), DIFFATTN_OK);
    std::string out = warning != nullptr ? warning : "(null)";
    diffattn_string_free(warning);
    return out;
  };
  EXPECT_EQ(warning_for(platform), "");
  json elsewhere = platform;
  elsewhere["compute_capability"] = "10.0";
  EXPECT_NE(warning_for(elsewhere).find("was tuned on somewhere"), std::string::npos);
  std::filesystem::remove(dir + "/cfg.tuning.json");
  char* none = nullptr;
  EXPECT_EQ(diffattn_session_tuning_warning(session, config_path.c_str(), &none), DIFFATTN_OK);
  EXPECT_STREQ(none, "");
  diffattn_string_free(none);
  diffattn_session_destroy(session);
  std::filesystem::remove_all(dir);
}

TEST(CApiJson, ADlpackBoolMaskMasksAsAUint8One) {
  std::mt19937 rng = seeded_rng();
  const int B = 2, S = 19, H = 2, D = 16;
  Buffer q = random_buffer({B, S, H, D}, rng), k = random_buffer({B, S, H, D}, rng), v = random_buffer({B, S, H, D}, rng);
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(B * S));
  std::bernoulli_distribution coin(0.6);
  for (auto& x : keep) x = coin(rng) ? 1 : 0;
  keep[0] = keep[static_cast<std::size_t>(S)] = 1;  // no batch drops every key
  std::vector<std::int64_t> mask_shape = {B, S};
  const DLTensor as_uint8 = bool_tensor(keep, mask_shape);
  DLTensor as_bool = as_uint8;
  as_bool.dtype.code = 6;  // kDLBool (DLPack 0.8), as NumPy exports bool arrays

  Session s(R"({"default": {"backend": "TORCH_SDPA"}})");
  const diffattn_layer_desc desc = layer_desc(H, 0, D);
  Layer layer;
  ASSERT_EQ(diffattn_layer_create(s.s, &desc, &layer.l), DIFFATTN_OK) << diffattn_last_error();
  Buffer out_uint8 = nan_buffer({B, S, H, D}), out_bool = nan_buffer({B, S, H, D}), out_none = nan_buffer({B, S, H, D});
  DLTensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor();
  DLTensor o1 = out_uint8.tensor(), o2 = out_bool.tensor(), o3 = out_none.tensor();
  ASSERT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &o1, &as_uint8, nullptr, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
  ASSERT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &o2, &as_bool, nullptr, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
  ASSERT_EQ(diffattn_layer_forward(layer.l, &tq, &tk, &tv, &o3, nullptr, nullptr, nullptr), DIFFATTN_OK)
      << diffattn_last_error();
  EXPECT_EQ(out_bool.data, out_uint8.data);
  EXPECT_NE(out_bool.data, out_none.data);
}

}  // namespace
}  // namespace diffattn
