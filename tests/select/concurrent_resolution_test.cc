#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "platform/described_platforms.h"
#include "registry/test_descriptors.h"
#include "select/counting_platform.h"
#include "select/log_capture.h"

// These run under ThreadSanitizer in the tsan preset, which builds only the selection core: the
// backends they resolve to are test descriptors named like the built-ins.
namespace diffattn {
namespace {

AttentionConfig mixed_config() {
  AttentionConfig config;
  config.per_role["cross"].backend = "TORCH_SDPA";
  config.per_role["ltx2.audio_self"].backend = "cudnn_attn";
  return config;
}

TEST(SelectorConcurrencyTest, ConcurrentResolutionFromEightThreadsDecidesEachKeyOnce) {
  Registry registry;
  ASSERT_TRUE(testing::register_test_backends(registry, {"TORCH_SDPA", "CUDNN_ATTN"}).ok());
  auto counting = std::make_shared<testing::CountingPlatform>();
  Selector selector(counting, &registry);
  testing::LogCapture capture;
  const AttentionConfig config = mixed_config();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const int head = (i % 2 == 0) ? 64 : 128;
        auto self = selector.resolve("self", head, config, "self", LayerTraits{.allows_trtllm_default = (i + t) % 3 == 0});
        auto cross = selector.resolve("cross", head, config, "cross");
        auto audio = selector.resolve("ltx2.audio_self", head, config, "self");
        if (!self.ok() || self->backend != "TORCH_SDPA" || self->spec.has_value()) ++failures;
        if (!cross.ok() || cross->backend != "TORCH_SDPA" || !cross->spec.has_value()) ++failures;
        if (!audio.ok() || audio->backend != "CUDNN_ATTN") ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  // Defaults: 2 heads x 2 TRTLLM flags; explicit: 2 names x 2 heads.
  EXPECT_EQ(selector.platform_queries(), 8u);
  EXPECT_EQ(counting->calls().size(), 8u);
  EXPECT_EQ(capture.lines_with("Resolved diffusion attention backend").size(), 3u);
}

TEST(SelectorConcurrencyTest, ConcurrentResolutionOnDescribedGpusAgreesWithSerialAnswers) {
  Registry registry;
  ASSERT_TRUE(testing::register_test_backends(registry, {"TORCH_SDPA", "FLASH_ATTN", "CUDNN_ATTN"}).ok());
  for (auto [major, minor] : {std::pair{9, 0}, {10, 0}, {12, 0}}) {
    Selector selector(make_platform(testing::probed_like(major, minor), registry), &registry);
    const AttentionConfig config = mixed_config();
    auto serial = selector.resolve("self", 128, AttentionConfig{}, "self");
    ASSERT_TRUE(serial.ok());
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 100; ++i) {
          auto again = selector.resolve("self", 128, AttentionConfig{}, "self");
          auto cross = selector.resolve("cross", 96 + 32 * (i % 2), config, "cross");
          if (!again.ok() || again->backend != serial->backend || again->considered != serial->considered) ++mismatches;
          if (!cross.ok() || cross->backend != "TORCH_SDPA") ++mismatches;
        }
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(mismatches.load(), 0) << "sm_" << major << minor;
  }
}

}  // namespace
}  // namespace diffattn
