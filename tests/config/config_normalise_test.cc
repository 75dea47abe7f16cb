// AttentionConfig from JSON: normalisation, per_role flattening and spec lookup per role.

#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"

namespace diffattn {
namespace {

using nlohmann::json;
using testing_config::expect_config_error;

AttentionSpec named_spec(std::string backend) {
  AttentionSpec spec;
  spec.backend = std::move(backend);
  return spec;
}

AttentionConfig parse_ok(std::string_view text) {
  auto config = parse_attention_config_json(text, global_registry());
  EXPECT_TRUE(config.ok()) << text << ": " << config.status().message();
  return config.ok() ? config.value() : AttentionConfig{};
}

TEST(AttentionConfigTest, EmptyObjectAndNullAreEmpty) {
  EXPECT_TRUE(parse_ok("{}").empty());
  EXPECT_TRUE(parse_ok("null").empty());
  EXPECT_TRUE(parse_ok(R"({"default": null, "per_role": null})").empty());
  EXPECT_TRUE(parse_ok(R"({"per_role": {}})").empty());
}

TEST(AttentionConfigTest, StringAndObjectSpecsNormalise) {
  const AttentionConfig config =
      parse_ok(R"({"default": "FLASH_ATTN", "per_role": {"cross": {"backend": "TORCH_SDPA"}, "self": "SAGE_ATTN"}})");
  ASSERT_TRUE(config.default_spec);
  EXPECT_EQ(config.default_spec->backend, "FLASH_ATTN");
  EXPECT_EQ(config.default_origin, DefaultOrigin::kConfig);
  ASSERT_EQ(config.per_role.size(), 2u);
  EXPECT_EQ(config.per_role.at("cross").backend, "TORCH_SDPA");
  EXPECT_EQ(config.per_role.at("self").backend, "SAGE_ATTN");
}

TEST(AttentionConfigTest, NestedPerRoleFlattensToDottedRoles) {
  const AttentionConfig config = parse_ok(
      R"({"per_role": {"ltx2": {"audio_self": {"backend": "FLASH_ATTN"}, "audio_to_video": "TORCH_SDPA",
          "deeper": {"still": {"backend": "CUDNN_ATTN"}}}}})");
  ASSERT_EQ(config.per_role.size(), 3u);
  EXPECT_EQ(config.per_role.at("ltx2.audio_self").backend, "FLASH_ATTN");
  EXPECT_EQ(config.per_role.at("ltx2.audio_to_video").backend, "TORCH_SDPA");
  EXPECT_EQ(config.per_role.at("ltx2.deeper.still").backend, "CUDNN_ATTN");
  // A dotted key names the same role as the nested form.
  EXPECT_EQ(parse_ok(R"({"per_role": {"ltx2.audio_self": "FLASH_ATTN"}})").per_role,
            parse_ok(R"({"per_role": {"ltx2": {"audio_self": "FLASH_ATTN"}}})").per_role);
}

TEST(AttentionConfigTest, ALeafWithOnlyExtraOrBlocksIsASpecAndNeedsABackend) {
  expect_config_error(
      parse_attention_config_json(R"({"per_role": {"self": {"extra": {"k": 1}}}})", global_registry()).status(),
      {"per_role['self']", "backend is required"});
}

TEST(AttentionConfigTest, MixingSpecKeysWithRoleKeysIsRejected) {
  expect_config_error(parse_attention_config_json(
                          R"({"per_role": {"ltx2": {"backend": "FLASH_ATTN", "audio_self": "X"}}})", global_registry())
                          .status(),
                      {"Invalid per_role entry for role 'ltx2'", "cannot mix", "'audio_self'"});
}

TEST(AttentionConfigTest, EmptyRoleEntryIsRejected) {
  expect_config_error(
      parse_attention_config_json(R"({"per_role": {"ltx2": {"audio_self": {}}}})", global_registry()).status(),
      {"Empty per_role entry for role 'ltx2.audio_self'"});
  expect_config_error(parse_attention_config_json(R"({"per_role": {"": "FLASH_ATTN"}})", global_registry()).status(),
                      {"role name is empty"});
}

TEST(AttentionConfigTest, RoleGivenTwiceIsRejected) {
  expect_config_error(
      parse_attention_config_json(R"({"per_role": {"a.b": "FLASH_ATTN", "a": {"b": "TORCH_SDPA"}}})", global_registry())
          .status(),
      {"role 'a.b' is given twice"});
}

TEST(AttentionConfigTest, AutoEntriesAreDropped) {
  const AttentionConfig config =
      parse_ok(R"({"default": "auto", "per_role": {"cross": "AUTO", "self": {"backend": "Auto"}, "joint": "FLASH_ATTN"}})");
  EXPECT_FALSE(config.default_spec);
  ASSERT_EQ(config.per_role.size(), 1u);
  EXPECT_TRUE(config.per_role.count("joint"));
}

TEST(AttentionConfigTest, TypeErrorsNameTheField) {
  expect_config_error(parse_attention_config_json(R"({"per_role": {"cross": 7}})", global_registry()).status(),
                      {"per_role['cross']", "expected a backend name (string) or a spec object, got number"});
  expect_config_error(parse_attention_config_json(R"({"default": ["FLASH_ATTN"]})", global_registry()).status(),
                      {"default", "got array"});
  expect_config_error(parse_attention_config_json(R"({"per_role": ["cross"]})", global_registry()).status(),
                      {"per_role", "expected an object mapping roles to specs"});
  expect_config_error(parse_attention_config_json(R"("FLASH_ATTN")", global_registry()).status(),
                      {"must be a JSON object with keys default and per_role"});
}

TEST(AttentionConfigTest, UnknownTopLevelKeyListsTheValidKeys) {
  expect_config_error(parse_attention_config_json(R"({"defaults": "FLASH_ATTN"})", global_registry()).status(),
                      {"unknown key 'defaults'", "valid keys: default, per_role."});
}

TEST(AttentionConfigTest, ErrorsInsideRolesNameTheRoleAndBackend) {
  expect_config_error(
      parse_attention_config_json(
          R"({"per_role": {"cross": {"backend": "TORCH_SDPA", "quant": {"dtype_qk": "int8"}}}})", global_registry())
          .status(),
      {"per_role['cross']", "backend='TORCH_SDPA'", "Remove quant or set backend to FLASHINFER_ATTN or TRTLLM_ATTN."});
}

TEST(AttentionConfigTest, MalformedJsonIsAnErrorNotACrash) {
  for (const char* text : {"", "{", R"({"default": )", R"({"default": "FLASH_ATTN",})", "nul", "{\"a\": 1e400}",
                           "\xff\xfe", "[1, 2", "{\"default\": \"\xc3\x28\"}"}) {
    auto config = parse_attention_config_json(text, global_registry());
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_EQ(config.status().code(), ErrorCode::kInvalidConfig);
    EXPECT_NE(config.status().message().find("--diffusion-attention-config"), std::string::npos)
        << config.status().message();
  }
}

TEST(AttentionConfigTest, DeepNestingIsRejectedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_config_error(parse_attention_config_json(deep, global_registry()).status(), {"nests deeper than 16 levels"});
  std::string roles = R"({"per_role": )";
  for (int i = 0; i < 20; ++i) roles += R"({"r": )";
  roles += R"("FLASH_ATTN")" + std::string(21, '}');
  expect_config_error(parse_attention_config_json(roles, global_registry()).status(), {"nests deeper than 16 levels"});
  // Brackets inside strings do not count.
  EXPECT_TRUE(parse_attention_config_json(R"({"default": {"backend": "X", "extra": {"s": "[[[[[[[[[[[[[[[[[[[["}}})",
                                          global_registry())
                  .ok());
}

TEST(AttentionConfigTest, DeepPerRoleNestingBuiltInCodeIsRejected) {
  json node = "FLASH_ATTN";
  for (int i = 0; i < 40; ++i) node = json::object({{"r", node}});
  expect_config_error(config_from_json(json::object({{"per_role", node}}), global_registry()).status(),
                      {"nest deeper than 16 levels"});
}

class ResolveSpecTest : public ::testing::Test {
 protected:
  AttentionConfig config_ = parse_ok(
      R"({"default": "FLASH_ATTN", "per_role": {"cross": "TORCH_SDPA", "ltx2": {"audio_to_video": "SAGE_ATTN"}}})");
};

TEST_F(ResolveSpecTest, ExactRoleMatch) {
  const SpecLookup lookup = resolve_spec_for_role(config_, "ltx2.audio_to_video", "cross");
  ASSERT_NE(lookup.spec, nullptr);
  EXPECT_EQ(lookup.spec->backend, "SAGE_ATTN");
  EXPECT_EQ(lookup.source, SpecSource::kPerRole);
  EXPECT_EQ(lookup.source_detail, "per_role['ltx2.audio_to_video']");
}

TEST_F(ResolveSpecTest, CategoryFallback) {
  const SpecLookup lookup = resolve_spec_for_role(config_, "ltx2.video_to_audio", "cross");
  ASSERT_NE(lookup.spec, nullptr);
  EXPECT_EQ(lookup.spec->backend, "TORCH_SDPA");
  EXPECT_EQ(lookup.source, SpecSource::kCategory);
  EXPECT_EQ(lookup.source_detail, "per_role['cross'] (role_category fallback)");
}

TEST_F(ResolveSpecTest, ExactBeatsCategory) {
  config_.per_role["self"] = named_spec("CUDNN_ATTN");
  config_.per_role["joint"] = named_spec("SAGE_ATTN");
  const SpecLookup lookup = resolve_spec_for_role(config_, "joint", "self");
  EXPECT_EQ(lookup.spec->backend, "SAGE_ATTN");
  EXPECT_EQ(lookup.source, SpecSource::kPerRole);
}

TEST_F(ResolveSpecTest, DefaultFallbackAndItsOrigin) {
  SpecLookup lookup = resolve_spec_for_role(config_, "self", std::nullopt);
  ASSERT_NE(lookup.spec, nullptr);
  EXPECT_EQ(lookup.spec->backend, "FLASH_ATTN");
  EXPECT_EQ(lookup.source, SpecSource::kDefault);
  EXPECT_EQ(lookup.source_detail, "attention_config.default");

  config_.default_origin = DefaultOrigin::kShorthand;
  EXPECT_EQ(resolve_spec_for_role(config_, "self", "self").source, SpecSource::kDefault);

  config_.default_origin = DefaultOrigin::kEnv;
  lookup = resolve_spec_for_role(config_, "self", "self");
  EXPECT_EQ(lookup.source, SpecSource::kEnv);
  EXPECT_EQ(lookup.source_detail, "DIFFUSION_ATTENTION_BACKEND");
}

TEST_F(ResolveSpecTest, NothingConfiguredMeansPlatformDefault) {
  const SpecLookup empty = resolve_spec_for_role(AttentionConfig{}, "self", "self");
  EXPECT_EQ(empty.spec, nullptr);
  EXPECT_FALSE(empty.source);

  config_.default_spec.reset();
  const SpecLookup no_category = resolve_spec_for_role(config_, "self", std::nullopt);
  EXPECT_EQ(no_category.spec, nullptr);
  // The category alone is not looked up when it is not given.
  EXPECT_EQ(resolve_spec_for_role(config_, "ltx2.audio_cross", std::nullopt).spec, nullptr);
}

TEST(ResolveSpecRepr, RoleWithAQuoteUsesDoubleQuotes) {
  AttentionConfig config;
  config.per_role["it's"] = named_spec("FLASH_ATTN");
  EXPECT_EQ(resolve_spec_for_role(config, "it's", std::nullopt).source_detail, "per_role[\"it's\"]");
}

// LTX-2 declares six roles in two categories; one config routes each of them differently.
TEST(AttentionConfigTest, Ltx2SixRoleScenario) {
  const AttentionConfig config = parse_ok(R"({
      "default": {"backend": "FLASH_ATTN"},
      "per_role": {
        "cross": "TORCH_SDPA",
        "ltx2": {"audio_self": {"backend": "CUDNN_ATTN"},
                 "audio_to_video": {"backend": "SAGE_ATTN"},
                 "video_to_audio": "auto"}}})");
  struct Case {
    const char* role;
    const char* category;
    const char* backend;
    SpecSource source;
  };
  const Case cases[] = {
      {"self", "self", "FLASH_ATTN", SpecSource::kDefault},
      {"cross", "cross", "TORCH_SDPA", SpecSource::kPerRole},
      {"ltx2.audio_self", "self", "CUDNN_ATTN", SpecSource::kPerRole},
      {"ltx2.audio_cross", "cross", "TORCH_SDPA", SpecSource::kCategory},
      {"ltx2.audio_to_video", "cross", "SAGE_ATTN", SpecSource::kPerRole},
      {"ltx2.video_to_audio", "cross", "TORCH_SDPA", SpecSource::kCategory},
  };
  for (const Case& c : cases) {
    const SpecLookup lookup = resolve_spec_for_role(config, c.role, c.category);
    ASSERT_NE(lookup.spec, nullptr) << c.role;
    EXPECT_EQ(lookup.spec->backend, c.backend) << c.role;
    EXPECT_EQ(lookup.source, c.source) << c.role;
  }
}

}  // namespace
}  // namespace diffattn
