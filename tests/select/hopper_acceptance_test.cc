// The foundation issue's acceptance scenario on a described H200, from the command-line surfaces
// (shorthand default + dotted per_role flag) through the real CUDA platform policy.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "platform/described_platforms.h"
#include "select/log_capture.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;

class HopperAcceptanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_backends(registry_);
    auto info = load_platform(testing::platform_file("h200.json"));
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    selector_ = std::make_unique<Selector>(make_platform(*info, registry_), &registry_);
  }
  Result<AttentionConfig> config(std::optional<std::string> shorthand) {
    ConfigSources sources;
    sources.dotted = {{"per_role.cross.backend", "TORCH_SDPA"}};
    sources.backend_shorthand = std::move(shorthand);
    return build_attention_config(sources, std::nullopt, global_registry());
  }
  Registry registry_;
  std::unique_ptr<Selector> selector_;
};

TEST_F(HopperAcceptanceTest, DefaultFlashAttnWithTorchSdpaForCross) {
  testing::LogCapture capture;
  auto cfg = config("FLASH_ATTN");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();

  auto self = selector_->resolve("self", 128, *cfg);
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  EXPECT_EQ(self->backend, "FLASH_ATTN");
  EXPECT_EQ(source_name(self->source), "default");

  auto cross = selector_->resolve("cross", 128, *cfg, "cross");
  ASSERT_TRUE(cross.ok()) << cross.status().ToString();
  EXPECT_EQ(cross->backend, "TORCH_SDPA");
  EXPECT_EQ(source_name(cross->source), "per_role");

  auto audio = selector_->resolve("ltx2.audio_to_video", 128, *cfg, "cross");
  ASSERT_TRUE(audio.ok()) << audio.status().ToString();
  EXPECT_EQ(audio->backend, "TORCH_SDPA");
  EXPECT_EQ(source_name(audio->source), "category");
  EXPECT_EQ(resolution_to_json(*audio)["spec"]["backend"], "TORCH_SDPA");

  EXPECT_EQ(capture.lines_with("for role='cross' (role_category='cross') via per_role['cross']").size(), 1u);
  EXPECT_EQ(capture.lines_with("'FLASH_ATTN' for role='self' via attention_config.default").size(), 1u);
}

TEST_F(HopperAcceptanceTest, PlatformDefaultIsFlashAttnWithoutSpec) {
  auto cfg = config(std::nullopt);
  ASSERT_TRUE(cfg.ok());
  auto self = selector_->resolve("self", 128, *cfg, "self");
  ASSERT_TRUE(self.ok());
  EXPECT_EQ(self->backend, "FLASH_ATTN");
  EXPECT_EQ(self->source, ResolutionSource::kPlatform);
  EXPECT_FALSE(self->spec.has_value());
}

TEST_F(HopperAcceptanceTest, ExplicitTrtllmFailsNamingDatacenterBlackwell) {
  auto cfg = config("TRTLLM_ATTN");
  ASSERT_TRUE(cfg.ok());
  auto self = selector_->resolve("self", 128, *cfg);
  ASSERT_FALSE(self.ok());
  EXPECT_EQ(self.status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(exit_code_for(self.status().code()), 3);
  EXPECT_THAT(self.status().message(), HasSubstr("SM100 / SM103"));
  // The cross role is configured separately and still resolves.
  auto cross = selector_->resolve("cross", 128, *cfg, "cross");
  ASSERT_TRUE(cross.ok());
  EXPECT_EQ(cross->backend, "TORCH_SDPA");
}

TEST_F(HopperAcceptanceTest, UnknownNameFailsWithExitCodeTwo) {
  auto cfg = config("FLASH_ATTENTION");
  ASSERT_TRUE(cfg.ok());
  auto self = selector_->resolve("self", 128, *cfg);
  ASSERT_FALSE(self.ok());
  EXPECT_EQ(self.status().code(), ErrorCode::kUnknownBackend);
  EXPECT_EQ(exit_code_for(self.status().code()), 2);
  EXPECT_THAT(self.status().message(), HasSubstr("Valid options are: TORCH_SDPA, FLASH_ATTN, CUDNN_ATTN"));
}

}  // namespace
}  // namespace diffattn
