// Our launcher on the CPU: the test binary relaunched as ranks (LauncherRank.* skip unless launched).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "parallel/launcher.h"

namespace diffattn::parallel {
namespace {

std::optional<RankEnvironment> launched() {
  auto env = rank_environment();
  return env.ok() ? *env : std::nullopt;
}

TEST(LauncherRank, ExitsWithItsRank) {
  auto env = launched();
  if (!env) GTEST_SKIP() << "runs as a launched rank of Launcher.*";
  EXPECT_EQ(env->device, env->rank);
  EXPECT_EQ(env->world, 3);
  EXPECT_FALSE(env->id_file.empty());
}

TEST(LauncherRank, TheLastRankFailsAndTheOthersHang) {
  auto env = launched();
  if (!env) GTEST_SKIP() << "runs as a launched rank of Launcher.*";
  if (env->rank == env->world - 1) std::_Exit(7);
  std::this_thread::sleep_for(std::chrono::minutes(5));  // as a rank blocked on its dead peer
}

TEST(Launcher, RanksGetTheirRankAndAllSucceed) {
  if (std::getenv(kRankEnv)) GTEST_SKIP() << "not inside a launched rank";
  auto code = launch_local_ranks(3, {"--gtest_filter=LauncherRank.ExitsWithItsRank"});
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0);
}

TEST(Launcher, AFailedRankEndsTheHangingOthersAfterTheGrace) {
  if (std::getenv(kRankEnv)) GTEST_SKIP() << "not inside a launched rank";
  const auto start = std::chrono::steady_clock::now();
  auto code = launch_local_ranks(3, {"--gtest_filter=LauncherRank.TheLastRankFailsAndTheOthersHang"},
                                 std::chrono::milliseconds(500));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 7);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(Launcher, BadRankEnvironmentIsAnError) {
  if (std::getenv(kRankEnv)) GTEST_SKIP() << "not inside a launched rank";
  setenv(kRankEnv, "5", 1);
  setenv(kWorldEnv, "2", 1);
  setenv(kDeviceEnv, "0", 1);
  setenv(kIdFileEnv, "/tmp/x", 1);
  auto env = rank_environment();
  EXPECT_FALSE(env.ok());
  unsetenv(kRankEnv);
  unsetenv(kWorldEnv);
  unsetenv(kDeviceEnv);
  unsetenv(kIdFileEnv);
  auto none = rank_environment();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace diffattn::parallel
