// The shorthand, --fastvideo-vsa-topk and DIFFUSION_ATTENTION_BACKEND on top of the structured config.

#include <gtest/gtest.h>

#include <cstdlib>

#include "config/config_test_util.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"
#include "diffattn/log.h"

namespace diffattn {
namespace {

using testing_config::dotted;
using testing_config::expect_config_error;

ConfigSources shorthand(std::string name) {
  ConfigSources sources;
  sources.backend_shorthand = std::move(name);
  return sources;
}

TEST(ShorthandTest, SetsTheDefaultWithItsOrigin) {
  auto config = parse_attention_config(shorthand("FLASH_ATTN"), global_registry());
  ASSERT_TRUE(config.ok()) << config.status().message();
  ASSERT_TRUE(config->default_spec);
  EXPECT_EQ(config->default_spec->backend, "FLASH_ATTN");
  EXPECT_EQ(config->default_origin, DefaultOrigin::kShorthand);
}

TEST(ShorthandTest, CombinesWithPerRole) {
  ConfigSources sources = dotted({{"per_role.cross.backend", "TORCH_SDPA"}});
  sources.backend_shorthand = "FLASH_ATTN";
  auto config = parse_attention_config(sources, global_registry());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->default_spec->backend, "FLASH_ATTN");
  EXPECT_EQ(config->per_role.at("cross").backend, "TORCH_SDPA");
}

TEST(ShorthandTest, ExclusiveWithAnExplicitDefaultEvenWhenAuto) {
  for (const char* name : {"FLASH_ATTN", "auto", "AUTO"}) {
    ConfigSources sources = dotted({{"default.backend", "TORCH_SDPA"}});
    sources.backend_shorthand = name;
    expect_config_error(parse_attention_config(sources, global_registry()).status(),
                        {"--diffusion-attention-backend is mutually exclusive with "
                         "--diffusion-attention-config.default.backend."});
    ConfigSources json_sources = shorthand(name);
    json_sources.config_json = R"({"default": "TORCH_SDPA"})";
    expect_config_error(parse_attention_config(json_sources, global_registry()).status(), {"mutually exclusive"});
  }
}

TEST(ShorthandTest, ConfigDefaultAutoDoesNotConflict) {
  ConfigSources sources = shorthand("FLASH_ATTN");
  sources.config_json = R"({"default": "auto"})";
  auto config = parse_attention_config(sources, global_registry());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->default_spec->backend, "FLASH_ATTN");
}

TEST(ShorthandTest, AutoLeavesTheDefaultUnset) {
  auto config = parse_attention_config(shorthand("Auto"), global_registry());
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->default_spec);
}

TEST(ShorthandTest, RainFusionShorthandGetsDefaults) {
  auto config = parse_attention_config(shorthand("RAINFUSION_ATTN"), global_registry());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->default_spec->block_sparse, BlockSparseSpec{});
}

TEST(ShorthandTest, EmptyNameIsAnError) {
  expect_config_error(parse_attention_config(shorthand(""), global_registry()).status(),
                      {"--diffusion-attention-backend", "empty"});
}

TEST(FastVideoTopkFlagTest, Rules) {
  ConfigSources no_default;
  no_default.fastvideo_vsa_topk = 96;
  expect_config_error(parse_attention_config(no_default, global_registry()).status(),
                      {"--fastvideo-vsa-topk requires --diffusion-attention-backend FASTVIDEO_VSA."});

  ConfigSources other = shorthand("FLASH_ATTN");
  other.fastvideo_vsa_topk = 96;
  expect_config_error(parse_attention_config(other, global_registry()).status(),
                      {"--fastvideo-vsa-topk is only valid with the FASTVIDEO_VSA backend", "'FLASH_ATTN'"});

  ConfigSources ok = shorthand("fastvideo_vsa");
  ok.fastvideo_vsa_topk = 96;
  auto config = parse_attention_config(ok, global_registry());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->default_spec->fastvideo_vsa_topk, 96);
  EXPECT_EQ(backend_kwargs(*config->default_spec), nlohmann::json::parse(R"({"topk": 96})"));

  ConfigSources zero = shorthand("FASTVIDEO_VSA");
  zero.fastvideo_vsa_topk = 0;
  expect_config_error(parse_attention_config(zero, global_registry()).status(),
                      {"fastvideo_vsa_topk must be positive"});

  ConfigSources from_json;
  from_json.config_json = R"({"default": "FASTVIDEO_VSA"})";
  from_json.fastvideo_vsa_topk = 12;
  ASSERT_TRUE(parse_attention_config(from_json, global_registry()).ok());
}

TEST(BuildAttentionConfigTest, EnvSetsTheDefault) {
  auto config = build_attention_config(ConfigSources{}, "SAGE_ATTN", global_registry());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->default_spec->backend, "SAGE_ATTN");
  EXPECT_EQ(config->default_origin, DefaultOrigin::kEnv);
  EXPECT_EQ(resolve_spec_for_role(*config, "self", "self").source, SpecSource::kEnv);
}

TEST(BuildAttentionConfigTest, EnvKeepsCaseAndLogsOnce) {
  std::vector<std::string> lines;
  LogSink previous = set_log_sink([&](LogLevel, std::string_view line) { lines.emplace_back(line); });
  auto config = build_attention_config(dotted({{"per_role.cross", "TORCH_SDPA"}}), "flash_attn", global_registry());
  set_log_sink(previous);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->default_spec->backend, "flash_attn");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("DIFFUSION_ATTENTION_BACKEND 'flash_attn'"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("'cross': TORCH_SDPA"), std::string::npos) << lines[0];
}

TEST(BuildAttentionConfigTest, ShorthandOverridesEnv) {
  auto config = build_attention_config(shorthand("FLASH_ATTN"), "SAGE_ATTN", global_registry());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->default_spec->backend, "FLASH_ATTN");
  EXPECT_EQ(config->default_origin, DefaultOrigin::kShorthand);
}

TEST(BuildAttentionConfigTest, ExplicitShorthandAutoWinsOverEnv) {
  auto config = build_attention_config(shorthand("auto"), "SAGE_ATTN", global_registry());
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->default_spec);
}

TEST(BuildAttentionConfigTest, ExplicitDefaultIgnoresEnv) {
  ConfigSources sources;
  sources.config_json = R"({"default": "FLASH_ATTN"})";
  auto config = build_attention_config(sources, "self=FLASH_ATTN,cross=TORCH_SDPA", global_registry());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->default_spec->backend, "FLASH_ATTN");
  EXPECT_EQ(config->default_origin, DefaultOrigin::kConfig);
}

TEST(BuildAttentionConfigTest, EnvFillsDefaultAlongsidePerRole) {
  auto config =
      build_attention_config(dotted({{"per_role.cross.backend", "TORCH_SDPA"}}), "FLASH_ATTN", global_registry());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->default_spec->backend, "FLASH_ATTN");
  EXPECT_EQ(config->per_role.at("cross").backend, "TORCH_SDPA");
}

TEST(BuildAttentionConfigTest, EnvAutoOrEmptyOrUnsetGivesNothing) {
  for (std::optional<std::string> env : {std::optional<std::string>("auto"), std::optional<std::string>("AUTO"),
                                         std::optional<std::string>(""), std::optional<std::string>()}) {
    auto config = build_attention_config(ConfigSources{}, env, global_registry());
    ASSERT_TRUE(config.ok());
    EXPECT_FALSE(config->default_spec);
  }
}

TEST(BuildAttentionConfigTest, ConfigErrorsComeBeforeTheEnv) {
  ConfigSources sources = shorthand("FLASH_ATTN");
  sources.config_json = R"({"default": "TORCH_SDPA"})";
  expect_config_error(build_attention_config(sources, "SAGE_ATTN", global_registry()).status(), {"mutually exclusive"});
}

TEST(BuildAttentionConfigTest, ParseDoesNotReadTheEnvironment) {
  ASSERT_EQ(setenv("DIFFUSION_ATTENTION_BACKEND", "SAGE_ATTN", 1), 0);
  auto parsed = parse_attention_config(ConfigSources{}, global_registry());
  EXPECT_EQ(env_attention_backend(), "SAGE_ATTN");
  ASSERT_EQ(unsetenv("DIFFUSION_ATTENTION_BACKEND"), 0);
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->default_spec);
  EXPECT_FALSE(env_attention_backend());
}

}  // namespace
}  // namespace diffattn
