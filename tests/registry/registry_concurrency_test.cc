#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "diffattn/registry.h"
#include "registry/test_descriptors.h"

// Runs under ThreadSanitizer in the tsan preset, which builds only the selection core.
namespace diffattn {
namespace {

TEST(RegistryConcurrencyTest, ConcurrentLookupsAndReplacementsAreSafe) {
  Registry registry;
  ASSERT_TRUE(testing::register_test_backends(registry, {"STEADY_ATTN", "SWAPPED_ATTN"}).ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (t % 2 == 0) {
          if (!registry.replace_implementation("SWAPPED_ATTN", testing::factory_named("t" + std::to_string(t))).ok()) {
            ++failures;
          }
          registry.clear_override("SWAPPED_ATTN");
        } else {
          if (!registry.find("STEADY_ATTN").ok()) ++failures;
          auto created = registry.create("SWAPPED_ATTN", BackendInit{});
          if (!created.ok()) ++failures;
          (void)registry.is_overridden("SWAPPED_ATTN");
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_FALSE(registry.is_overridden("SWAPPED_ATTN"));
}

}  // namespace
}  // namespace diffattn
