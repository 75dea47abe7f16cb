#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "select/counting_platform.h"
#include "select/log_capture.h"

namespace diffattn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::CountingPlatform;
using Call = CountingPlatform::Call;

AttentionSpec spec_for(const char* backend) {
  AttentionSpec spec;
  spec.backend = backend;
  return spec;
}

class SelectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_backends(registry_);
    platform_ = std::make_shared<CountingPlatform>();
    selector_ = std::make_unique<Selector>(platform_, &registry_);
  }
  Registry registry_;
  std::shared_ptr<CountingPlatform> platform_;
  std::unique_ptr<Selector> selector_;
};

TEST_F(SelectorTest, ExactRoleBeatsCategoryBeatsDefault) {
  AttentionConfig config;
  config.default_spec = spec_for("TORCH_SDPA");
  config.per_role["ltx2.audio_to_video"] = spec_for("FLASH_ATTN");
  config.per_role["cross"] = spec_for("CUDNN_ATTN");

  auto exact = selector_->resolve("ltx2.audio_to_video", 128, config, "cross");
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->backend, "FLASH_ATTN");
  EXPECT_EQ(exact->source, ResolutionSource::kPerRole);
  EXPECT_EQ(exact->spec, spec_for("FLASH_ATTN"));

  auto category = selector_->resolve("ltx2.video_to_audio", 128, config, "cross");
  ASSERT_TRUE(category.ok());
  EXPECT_EQ(category->backend, "CUDNN_ATTN");
  EXPECT_EQ(category->source, ResolutionSource::kCategory);

  auto by_default = selector_->resolve("self", 128, config, "self");
  ASSERT_TRUE(by_default.ok());
  EXPECT_EQ(by_default->backend, "TORCH_SDPA");
  EXPECT_EQ(by_default->source, ResolutionSource::kDefault);
  EXPECT_EQ(by_default->source_detail, "attention_config.default");
  EXPECT_TRUE(by_default->considered.empty());

  // Explicit selections consult the platform with TRTLLM allowed, whatever the caller passed.
  EXPECT_THAT(platform_->calls(), ElementsAre(Call{"FLASH_ATTN", 128, true}, Call{"CUDNN_ATTN", 128, true},
                                              Call{"TORCH_SDPA", 128, true}));
}

TEST_F(SelectorTest, EnvironmentDefaultSitsBelowConfigurationAndAbovePlatform) {
  AttentionConfig config;
  config.default_spec = spec_for("FLASH_ATTN");
  config.default_origin = DefaultOrigin::kEnv;
  config.per_role["cross"] = spec_for("TORCH_SDPA");
  auto env = selector_->resolve("self", 128, config);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->backend, "FLASH_ATTN");
  EXPECT_EQ(env->source, ResolutionSource::kEnv);
  auto role = selector_->resolve("cross", 128, config);
  ASSERT_TRUE(role.ok());
  EXPECT_EQ(role->source, ResolutionSource::kPerRole);
}

TEST_F(SelectorTest, PlatformDefaultHasNoSpec) {
  auto resolution = selector_->resolve("self", 64, AttentionConfig{}, std::nullopt, LayerTraits{});
  ASSERT_TRUE(resolution.ok());
  EXPECT_EQ(resolution->backend, "TORCH_SDPA");
  EXPECT_FALSE(resolution->spec.has_value());
  EXPECT_EQ(resolution->source, ResolutionSource::kPlatform);
  EXPECT_EQ(resolution->source_detail, "platform default");
  EXPECT_THAT(resolution->considered, ElementsAre(Considered{"FLASH_ATTN", "not on this test platform"}));
  EXPECT_THAT(platform_->calls(), ElementsAre(Call{std::nullopt, 64, false}));
}

TEST_F(SelectorTest, PlatformIsConsultedOncePerKey) {
  AttentionConfig explicit_config;
  explicit_config.default_spec = spec_for("FLASH_ATTN");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(selector_->resolve("self", 128, explicit_config, std::nullopt, LayerTraits::Unconstrained()).ok());
    ASSERT_TRUE(selector_->resolve("cross", 128, explicit_config, "cross", LayerTraits{}).ok());
    ASSERT_TRUE(selector_->resolve("self", 128, AttentionConfig{}, std::nullopt, LayerTraits::Unconstrained()).ok());
    ASSERT_TRUE(selector_->resolve("self", 128, AttentionConfig{}, std::nullopt, LayerTraits{}).ok());
    ASSERT_TRUE(selector_->resolve("self", 64, AttentionConfig{}, std::nullopt, LayerTraits{}).ok());
  }
  EXPECT_THAT(platform_->calls(), ElementsAre(Call{"FLASH_ATTN", 128, true}, Call{std::nullopt, 128, true},
                                              Call{std::nullopt, 128, false}, Call{std::nullopt, 64, false}));
  EXPECT_EQ(selector_->platform_queries(), 4u);
}

TEST_F(SelectorTest, RawSpellingIsPartOfTheKey) {
  AttentionConfig lower;
  lower.default_spec = spec_for("flash_attn");
  AttentionConfig upper;
  upper.default_spec = spec_for("FLASH_ATTN");
  auto a = selector_->resolve("self", 128, lower);
  auto b = selector_->resolve("self", 128, upper);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->backend, "FLASH_ATTN");
  EXPECT_EQ(b->backend, "FLASH_ATTN");
  EXPECT_EQ(a->spec->backend, "flash_attn");
  EXPECT_EQ(selector_->platform_queries(), 2u);
}

TEST_F(SelectorTest, PlatformErrorsPropagateAndAreCached) {
  AttentionConfig config;
  config.default_spec = spec_for("REJECTED_ATTN");
  for (int i = 0; i < 2; ++i) {
    auto resolution = selector_->resolve("self", 128, config);
    ASSERT_FALSE(resolution.ok());
    EXPECT_EQ(resolution.status().code(), ErrorCode::kUnsupported);
    EXPECT_THAT(resolution.status().message(), HasSubstr("cannot run on the counting platform"));
  }
  EXPECT_EQ(selector_->platform_queries(), 1u);
}

TEST_F(SelectorTest, ExplicitSpecsAreValidatedByTheChosenBackend) {
  AttentionConfig config;
  config.default_spec = spec_for("TRTLLM_ATTN");
  config.default_spec->quant = AttnQuantSpec{};
  config.default_spec->quant->dtype_qk = "bfloat16";
  auto bad_quant = selector_->resolve("self", 128, config);
  ASSERT_FALSE(bad_quant.ok());
  EXPECT_EQ(bad_quant.status().code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(bad_quant.status().message(), HasSubstr("quant.dtype_qk in [int8, fp8_e4m3]"));

  config.default_spec->quant->dtype_qk = "int8";
  EXPECT_TRUE(selector_->resolve("self", 128, config).ok());

  AttentionConfig foreign_block;
  foreign_block.default_spec = spec_for("TORCH_SDPA");
  foreign_block.default_spec->skip_softmax = SkipSoftmaxSpec{.threshold = 0.5};
  auto foreign = selector_->resolve("self", 128, foreign_block);
  ASSERT_FALSE(foreign.ok());
  EXPECT_THAT(foreign.status().message(), HasSubstr("'skip_softmax' block is not read by TORCH_SDPA"));

  AttentionConfig extra;
  extra.default_spec = spec_for("FLASH_ATTN");
  extra.default_spec->extra = {{"block_size", 128}};
  auto unread = selector_->resolve("self", 128, extra);
  ASSERT_FALSE(unread.ok());
  EXPECT_THAT(unread.status().message(), HasSubstr("FLASH_ATTN does not read extra.block_size"));
}

TEST_F(SelectorTest, UnregisteredDecisionIsAnError) {
  AttentionConfig config;
  config.default_spec = spec_for("NOT_REGISTERED");
  auto resolution = selector_->resolve("self", 128, config);
  ASSERT_FALSE(resolution.ok());
  EXPECT_EQ(resolution.status().code(), ErrorCode::kUnknownBackend);
}

TEST_F(SelectorTest, LogsOncePerRoleCategoryBackendAndSource) {
  testing::LogCapture capture;
  AttentionConfig config;
  config.default_spec = spec_for("FLASH_ATTN");
  config.per_role["cross"] = spec_for("FLASH_ATTN");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(selector_->resolve("cross", 128, config, "cross").ok());
    ASSERT_TRUE(selector_->resolve("cross", 64, config, "cross").ok());
    ASSERT_TRUE(selector_->resolve("self", 128, config).ok());
    ASSERT_TRUE(selector_->resolve("self", 128, AttentionConfig{}).ok());
  }
  EXPECT_THAT(capture.lines_with("Resolved diffusion attention backend"),
              ElementsAre("Resolved diffusion attention backend 'FLASH_ATTN' for role='cross' "
                          "(role_category='cross') via per_role['cross']",
                          "Resolved diffusion attention backend 'FLASH_ATTN' for role='self' via attention_config.default",
                          "Resolved diffusion attention backend 'TORCH_SDPA' for role='self' via platform default"));
}

TEST_F(SelectorTest, ResolutionJsonHasTheDocumentedShape) {
  AttentionConfig config;
  config.per_role["cross"] = spec_for("TORCH_SDPA");
  auto role = selector_->resolve("ltx2.audio_to_video", 128, config, "cross");
  ASSERT_TRUE(role.ok());
  const nlohmann::json json = resolution_to_json(*role);
  EXPECT_EQ(json["role"], "ltx2.audio_to_video");
  EXPECT_EQ(json["category"], "cross");
  EXPECT_EQ(json["head_size"], 128);
  EXPECT_EQ(json["backend"], "TORCH_SDPA");
  EXPECT_EQ(json["source"], "category");
  EXPECT_EQ(json["spec"]["backend"], "TORCH_SDPA");
  EXPECT_TRUE(json["considered"].is_array());
  EXPECT_EQ(json.size(), 7u);

  auto platform = selector_->resolve("self", 96, AttentionConfig{});
  ASSERT_TRUE(platform.ok());
  const nlohmann::json pj = resolution_to_json(*platform);
  EXPECT_TRUE(pj["category"].is_null());
  EXPECT_TRUE(pj["spec"].is_null());
  EXPECT_EQ(pj["source"], "platform");
  EXPECT_EQ(pj["considered"], nlohmann::json::parse(R"([{"backend": "FLASH_ATTN", "reason": "not on this test platform"}])"));
}

TEST(SourceNameTest, NamesEverySource) {
  EXPECT_EQ(source_name(ResolutionSource::kPerRole), "per_role");
  EXPECT_EQ(source_name(ResolutionSource::kCategory), "category");
  EXPECT_EQ(source_name(ResolutionSource::kDefault), "default");
  EXPECT_EQ(source_name(ResolutionSource::kEnv), "env");
  EXPECT_EQ(source_name(ResolutionSource::kPlatform), "platform");
}

}  // namespace
}  // namespace diffattn
