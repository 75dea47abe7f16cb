// RAINFUSION_ATTN's CPU implementation as the oracle of its kernels: on every video case of the
// parity harness (one patch a frame each), on a video of several partial patches a frame, and on
// joint sequences with text before or after the video, its output at several sparsities equals the
// float64 oracle restricted to the tiles it listed (FlashAttention-3's tolerance rule), and at
// sparsity 0 it lists every tile. The plain harness runs it too, through the registry without
// options, where it keeps every tile.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "backends/rainfusion_reference.h"
#include "kernels/cpu/rainfusion_cpu.h"
#include "parity/cases.h"
#include "parity/parity_check.h"

namespace diffattn {
namespace {

std::vector<testing::ParityCase> rainfusion_cases() {
  std::vector<testing::ParityCase> cases;
  for (const testing::ParityCase& c : testing::parity_cases())
    if (c.video) cases.push_back(c);
  testing::ParityCase patches = cases.front();
  patches.video = VideoGeometry{3, 13, 28};  // 2 x 2 patches of up to 8 x 16 a frame, partial in both directions
  patches.seq_q = patches.seq_kv = patches.video->sequence_length();
  testing::ParityCase joint = cases.front();
  joint.video->text_after = 150;  // [video; text]
  joint.seq_q = joint.seq_kv = joint.video->sequence_length();
  testing::ParityCase prefix = cases[1];
  prefix.video->text_before = 260;  // [text; video], text over more than two tiles
  prefix.seq_q = prefix.seq_kv = prefix.video->sequence_length();
  prefix.heads_kv = 1;
  cases.insert(cases.end(), {patches, joint, prefix});
  return cases;
}

TEST(RainfusionParity, TheCpuPathIsTheOracleOverItsListedTiles) {
  std::random_device source;
  const auto seed = (static_cast<std::uint64_t>(source()) << 32) | source();
  std::mt19937_64 rng(seed);
  int checked = 0;
  for (const testing::ParityCase& c : rainfusion_cases()) {
    auto data = testing::make_case_data(c, rng);
    for (double sparsity : {0.0, 0.5, 0.8}) {
      RainFusionParams params;
      params.sparsity = sparsity;
      RainFusionPlan plan;
      testing::poison(data->problem.out);
      const Status s = run_rainfusion_cpu(data->problem, params, &plan);
      ASSERT_TRUE(s.ok()) << c.name() << ": " << s.message();
      if (sparsity == 0.0) EXPECT_DOUBLE_EQ(plan.density, 1.0) << c.name();
      AttentionProblem masked = testing::problem_with_plan_mask(*data, plan);
      testing::Expectation e = testing::expect(masked);
      EXPECT_EQ(testing::compare(data->problem, e), "") << c.name() << " sparsity " << sparsity << " (seed " << seed << ")";
      ++checked;
    }
  }
  std::printf("[ PARITY   ] RAINFUSION_ATTN: %d sparse runs checked against the masked oracle\n", checked);
}

}  // namespace
}  // namespace diffattn
