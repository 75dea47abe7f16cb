#include <gtest/gtest.h>

#include "runner/workload_plan.h"

namespace diffattn::runner {
namespace {

RunRequest request(const std::string& model) {
  RunRequest r;
  r.model = model;
  return r;
}

TEST(EvenlySpaced, IncludesBothEnds) {
  EXPECT_EQ(evenly_spaced(30, 3), (std::vector<int>{0, 15, 29}));
  EXPECT_EQ(evenly_spaced(2, 5), (std::vector<int>{0, 1}));
  EXPECT_EQ(evenly_spaced(40, 1), (std::vector<int>{0}));
  EXPECT_TRUE(evenly_spaced(4, 0).empty());
}

TEST(WorkloadPlan, UsesTheModelDefaultsAndItsTokenRule) {
  auto plan = plan_workload(request("wan2.2-ti2v-5b"), /*on_device=*/true, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->video_tokens, 27280);
  ASSERT_EQ(plan->roles.size(), 2u);
  EXPECT_EQ(plan->roles[0].layers, (std::vector<int>{0, 15, 29}));
  EXPECT_EQ(plan->roles[1].seqlen_kv, 512);
  EXPECT_DOUBLE_EQ(plan->roles[0].flops_per_call, 4.0 * 24 * 27280.0 * 27280.0 * 128);
}

TEST(WorkloadPlan, ResolutionFlagsChangeTheShapes) {
  RunRequest r = request("wan2.2-ti2v-5b");
  r.height = 704;
  r.width = 1280;
  r.frames = 49;
  r.layers = "all";
  auto plan = plan_workload(r, true, 3);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->roles[0].seqlen_q, 11440);
  EXPECT_EQ(plan->roles[0].layers.size(), 30u);
}

TEST(WorkloadPlan, LayerIndicesAreClippedPerRole) {
  RunRequest r = request("flux.1-dev");
  r.layers = "0,18,30";
  auto plan = plan_workload(r, true, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->roles[0].layers, (std::vector<int>{0, 18}));      // 19 double-stream blocks
  EXPECT_EQ(plan->roles[1].layers, (std::vector<int>{0, 18, 30}));  // 38 single-stream blocks
  EXPECT_FALSE(plan->notes.empty());
}

TEST(WorkloadPlan, BadSelectorsSayWhatToWrite) {
  RunRequest r = request("tiny-dit");
  r.layers = "2";  // a count up to the model's layers: fine
  EXPECT_TRUE(plan_workload(r, false, 1).ok());
  r.layers = "1";
  EXPECT_TRUE(plan_workload(r, false, 1).ok());
  r.layers = "x";
  EXPECT_FALSE(plan_workload(r, false, 1).ok());
}

TEST(WorkloadPlan, LayersBeyondTheModelNameItsLayerCount) {
  // flux.1-dev: 19 double-stream and 38 single-stream blocks; past 38 no role has the layer.
  RunRequest r = request("flux.1-dev");
  for (const char* selector : {"39", "100", "0,38", "40-41", "65535"}) {
    SCOPED_TRACE(selector);
    r.layers = selector;
    auto plan = plan_workload(r, true, 1);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), ErrorCode::kInvalidConfig);
    EXPECT_NE(plan.status().message().find("model 'flux.1-dev' has 38 layers per role"), std::string::npos)
        << plan.status().message();
  }
  for (const char* selector : {"38", "37", "0,37"}) {
    r.layers = selector;
    EXPECT_TRUE(plan_workload(r, true, 1).ok()) << selector;
  }
}

TEST(WorkloadPlan, CpuRunsOfBigModelsAreSampledOrRefused) {
  RunRequest r = request("wan2.1-1.3b");
  r.height = 128;
  r.width = 128;
  r.frames = 5;  // 2 x 8 x 8 = 128 tokens: small per call
  r.layers = "all";
  r.sample_steps = 50;
  r.cpu_budget_tflop = 0.005;  // one call per role fits (about 1e-3 TFLOP), 30 layers x 50 steps do not
  auto sampled = plan_workload(r, false, 1);
  ASSERT_TRUE(sampled.ok()) << sampled.status().message();
  EXPECT_EQ(sampled->roles[0].layers.size(), 1u);
  EXPECT_EQ(sampled->sampled_steps.size(), 1u);
  ASSERT_FALSE(sampled->notes.empty());
  EXPECT_NE(sampled->notes[0].find("sampled down"), std::string::npos);

  auto refused = plan_workload(request("wan2.1-14b"), false, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(refused.status().message().find("GPU"), std::string::npos);
  EXPECT_NE(refused.status().message().find("--cpu-budget-tflop"), std::string::npos);
}

TEST(WorkloadPlan, UnknownModelAndBadResolutionFail) {
  EXPECT_EQ(plan_workload(request("nope"), false, 1).status().code(), ErrorCode::kInvalidConfig);
  RunRequest r = request("tiny-dit");
  r.width = 250;
  EXPECT_EQ(plan_workload(r, false, 1).status().code(), ErrorCode::kInvalidInput);
}

}  // namespace
}  // namespace diffattn::runner
