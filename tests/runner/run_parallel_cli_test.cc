#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;

using testing::CliResult;

// The tool's stdout and stderr arrive through their own pipes (tests/cli/cli_runner.h): tests of
// this file run in parallel under CTest, so nothing may pass through a shared temporary file.
CliResult run_cli(const std::string& args) {
  std::vector<std::string> argv;
  std::istringstream words(args);
  for (std::string word; words >> word;) argv.push_back(word);
  return testing::run_cli(argv);
}

TEST(RunParallelCli, HybridRunMatchesOneRankAndReportsEveryRank) {
  // 7 x 7 latent positions x 3 frames: 147 tokens, which do not divide by 4 ranks (padding).
  const CliResult r = run_cli("run --platform cpu --model tiny-dit --height 112 --width 112 --num-frames 9 "
                           "--ulysses 2 --ring 2 --warmup 0 --repeats 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  EXPECT_EQ(doc.at("ranks"), 4);
  EXPECT_EQ(doc.at("engine"), "in-process");
  const auto& self = doc.at("roles").at(0);
  EXPECT_EQ(self.at("role"), "self");
  EXPECT_EQ(self.at("rank_ms").size(), 4u);
  EXPECT_GT(self.at("single_rank_ms").get<double>(), 0.0);
  EXPECT_LT(self.at("rel_l2").get<double>(), 1e-2);
  EXPECT_NE(self.at("image_tokens").get<int>() % 4, 0);
  EXPECT_THAT(doc.at("roles").at(1).at("skipped").get<std::string>(), HasSubstr("differ"));
}

TEST(RunParallelCli, TextPrintsTheResolutionOnceAndTheScaling) {
  const CliResult r = run_cli("run --platform cpu --model tiny-dit --height 64 --width 64 --num-frames 5 --ring 2 "
                           "--warmup 0 --repeats 1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ulysses 1 x ring 2 = 2 ranks (in-process threads)"));
  EXPECT_THAT(r.out, HasSubstr("efficiency"));
  const std::string line = "Resolved diffusion attention backend 'TORCH_SDPA' for role='self'";
  std::size_t count = 0;
  for (std::size_t at = r.err.find(line); at != std::string::npos; at = r.err.find(line, at + 1)) ++count;
  EXPECT_EQ(count, 1u) << r.err;
}

TEST(RunParallelCli, PromptTokensMaskTheTextKeysOnEveryRankAndTheReference) {
  const CliResult r = run_cli("run --platform cpu --model sd3-medium --height 128 --width 128 --ulysses 2 --ring 2 "
                           "--prompt-tokens 20 --warmup 0 --repeats 1 --dtype float32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out, nullptr, false);
  const auto& joint = doc.at("roles").at(0);
  EXPECT_EQ(joint.at("text_tokens"), 333);
  EXPECT_LT(joint.at("rel_l2").get<double>(), 1e-5);
}

TEST(RunParallelCli, IndivisibleHeadsAndRefusedOptionsExitWithTheReason) {
  // tiny-dit has 4 heads.
  const CliResult heads = run_cli("run --platform cpu --model tiny-dit --height 64 --width 64 --ulysses 3 --warmup 0 --repeats 1");
  EXPECT_EQ(heads.exit_code, 2) << heads.out << heads.err;
  EXPECT_THAT(heads.out, HasSubstr("do not divide by ulysses 3"));
  const CliResult compare = run_cli("run --platform cpu --ulysses 2 --compare TORCH_SDPA");
  EXPECT_EQ(compare.exit_code, 2);
  EXPECT_THAT(compare.err, HasSubstr("--compare"));
  const CliResult dumps = run_cli("run --platform cpu --ulysses 2 --activations /nonexistent");
  EXPECT_EQ(dumps.exit_code, 2);
  EXPECT_THAT(dumps.err, HasSubstr("--activations"));
}

}  // namespace
}  // namespace diffattn
