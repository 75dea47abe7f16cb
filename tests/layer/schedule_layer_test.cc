// A layer with an attention schedule: every profile resolves at construction, each call runs the
// backend of the range its denoising step falls in, and the log names the profile.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "diffattn/schedule.h"
#include "platform/described_platforms.h"
#include "select/log_capture.h"

namespace diffattn {
namespace {

DenoisingStep step_at(std::int64_t index, std::int64_t num_steps = 0, std::optional<double> sigma = std::nullopt) {
  DenoisingStep step;
  step.index = index;
  step.num_steps = num_steps;
  step.sigma = sigma;
  return step;
}


// Which backend each call reached, and the step it carried.
struct Calls {
  std::vector<std::string> backends;
  std::vector<std::int64_t> steps;
};

class NamedRecorder final : public Backend {
 public:
  NamedRecorder(std::string name, Calls* calls) : name_(std::move(name)), calls_(calls) {}
  std::string_view name() const override { return name_; }
  Status forward(const AttentionProblem& problem, void*) override {
    calls_->backends.push_back(name_);
    calls_->steps.push_back(problem.denoising ? problem.denoising->index : -1);
    return Status::Ok();
  }

 private:
  std::string name_;
  Calls* calls_;
};

class ScheduleLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_backends(registry_);
    for (const char* name : {"TORCH_SDPA", "SAGE_ATTN"}) {
      ASSERT_TRUE(registry_
                      .replace_implementation(name,
                                              [this, name](const BackendInit&) -> Result<std::unique_ptr<Backend>> {
                                                return std::unique_ptr<Backend>(
                                                    std::make_unique<NamedRecorder>(name, &calls_));
                                              })
                      .ok());
    }
  }

  AttentionSchedule schedule(const std::string& text) {
    auto s = schedule_from_json(nlohmann::json::parse(text), global_registry());
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() && s->has_value() ? **s : AttentionSchedule{};
  }

  Registry registry_;
  Calls calls_;
  std::vector<float> q_ = std::vector<float>(3 * 2 * 64, 0.5f), k_ = q_, v_ = q_, out_ = q_;

  // bfloat16, which both names declare (the layer holds every call to SAGE_ATTN's 16-bit dtypes,
  // whatever implementation runs behind the name); the recorders read no element.
  AttentionProblem call_at(std::optional<DenoisingStep> step) {
    AttentionProblem p;
    p.q = TensorView::Contiguous(q_.data(), DType::kBFloat16, {1, 3, 2, 64});
    p.k = TensorView::Contiguous(k_.data(), DType::kBFloat16, {1, 3, 2, 64});
    p.v = TensorView::Contiguous(v_.data(), DType::kBFloat16, {1, 3, 2, 64});
    p.out = TensorView::Contiguous(out_.data(), DType::kBFloat16, {1, 3, 2, 64});
    p.denoising = step;
    return p;
  }
};

AttentionLayerDesc layer(const std::string& role) {
  AttentionLayerDesc desc;
  desc.num_heads = 2;
  desc.head_size = 64;
  desc.role = role;
  desc.category = role;
  return desc;
}

AttentionConfig base_config() {
  AttentionConfig config;
  config.default_spec = AttentionSpec{};
  config.default_spec->backend = "TORCH_SDPA";
  return config;
}

constexpr const char* kSageFromStep3 =
    R"({"profiles": {"sage": {"default": "SAGE_ATTN"}}, "steps": [{"start": 3, "end": 6, "profile": "sage"}]})";

TEST_F(ScheduleLayerTest, EachStepRunsTheBackendOfItsRange) {
  Selector selector(make_platform(testing::described_cpu(), registry_), &registry_);
  const AttentionSchedule s = schedule(kSageFromStep3);
  auto attention = Attention::Create(layer("self"), base_config(), &s, selector);
  ASSERT_TRUE(attention.ok()) << attention.status().message();
  for (std::int64_t step = 0; step < 8; ++step) {
    ASSERT_TRUE(attention->forward(call_at(step_at(step, 8))).ok());
  }
  const std::vector<std::string> expected = {"TORCH_SDPA", "TORCH_SDPA", "TORCH_SDPA", "SAGE_ATTN",
                                             "SAGE_ATTN",  "SAGE_ATTN",  "TORCH_SDPA", "TORCH_SDPA"};
  EXPECT_EQ(calls_.backends, expected);
  EXPECT_EQ(calls_.steps, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));  // the backend sees the step too

  EXPECT_EQ(attention->resolution().backend, "TORCH_SDPA");
  ASSERT_EQ(attention->profile_resolutions().size(), 1u);
  EXPECT_EQ(attention->profile_resolutions()[0].backend, "SAGE_ATTN");
  EXPECT_EQ(attention->profile_resolutions()[0].profile, "sage");
  auto at5 = attention->resolution_for(step_at(5));
  ASSERT_TRUE(at5.ok());
  EXPECT_EQ((*at5)->backend, "SAGE_ATTN");
  auto at6 = attention->resolution_for(step_at(6));
  ASSERT_TRUE(at6.ok());
  EXPECT_EQ((*at6)->backend, "TORCH_SDPA");
  EXPECT_FALSE((*at6)->profile.has_value());
}

TEST_F(ScheduleLayerTest, ASigmaScheduleFollowsTheCallsNoiseLevel) {
  Selector selector(make_platform(testing::described_cpu(), registry_), &registry_);
  const AttentionSchedule s = schedule(
      R"({"profiles": {"sage": {"default": "SAGE_ATTN"}}, "sigma": [{"low": 0.0, "high": 0.4, "profile": "sage"}]})");
  auto attention = Attention::Create(layer("self"), base_config(), &s, selector);
  ASSERT_TRUE(attention.ok()) << attention.status().message();
  for (double sigma : {1.0, 0.5, 0.4, 0.39, 0.0}) {
    ASSERT_TRUE(attention->forward(call_at(step_at(0, 0, sigma))).ok());
  }
  EXPECT_EQ(calls_.backends,
            (std::vector<std::string>{"TORCH_SDPA", "TORCH_SDPA", "TORCH_SDPA", "SAGE_ATTN", "SAGE_ATTN"}));
  auto no_sigma = attention->forward(call_at(step_at(2)));
  ASSERT_FALSE(no_sigma.ok());
  EXPECT_NE(no_sigma.message().find("carries no sigma"), std::string::npos) << no_sigma.message();
}

TEST_F(ScheduleLayerTest, AScheduledCallMustCarryItsStep) {
  Selector selector(make_platform(testing::described_cpu(), registry_), &registry_);
  const AttentionSchedule s = schedule(kSageFromStep3);
  auto attention = Attention::Create(layer("self"), base_config(), &s, selector);
  ASSERT_TRUE(attention.ok()) << attention.status().message();
  const Status status = attention->forward(call_at(std::nullopt));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::kInvalidInput);
  EXPECT_NE(status.message().find("AttentionProblem::denoising"), std::string::npos) << status.message();
  EXPECT_TRUE(calls_.backends.empty());
}

TEST_F(ScheduleLayerTest, WithoutAScheduleTheStepIsIgnored) {
  Selector selector(make_platform(testing::described_cpu(), registry_), &registry_);
  auto attention = Attention::Create(layer("self"), base_config(), nullptr, selector);
  ASSERT_TRUE(attention.ok()) << attention.status().message();
  ASSERT_TRUE(attention->forward(call_at(std::nullopt)).ok());
  ASSERT_TRUE(attention->forward(call_at(step_at(4))).ok());
  EXPECT_EQ(calls_.backends, (std::vector<std::string>{"TORCH_SDPA", "TORCH_SDPA"}));
  EXPECT_TRUE(attention->profile_resolutions().empty());
}

// A profile resolves per role like any configuration: its per_role entries apply to their roles only.
TEST_F(ScheduleLayerTest, ProfilesResolvePerRole) {
  Selector selector(make_platform(testing::described_cpu(), registry_), &registry_);
  const AttentionSchedule s = schedule(R"({"profiles": {"sage": {"default": "SAGE_ATTN",
      "per_role": {"cross": "TORCH_SDPA"}}}, "steps": [{"start": 0, "end": null, "profile": "sage"}]})");
  auto self = Attention::Create(layer("self"), base_config(), &s, selector);
  auto cross = Attention::Create(layer("cross"), base_config(), &s, selector);
  ASSERT_TRUE(self.ok() && cross.ok());
  EXPECT_EQ(self->profile_resolutions()[0].backend, "SAGE_ATTN");
  EXPECT_EQ(cross->profile_resolutions()[0].backend, "TORCH_SDPA");
  EXPECT_EQ(cross->profile_resolutions()[0].source, ResolutionSource::kPerRole);
}

TEST_F(ScheduleLayerTest, AProfileThatCannotRunHereFailsConstructionNamingIt) {
  Selector selector(make_platform(testing::described_cpu(), registry_), &registry_);
  const AttentionSchedule s = schedule(
      R"({"profiles": {"fast": {"default": "FLASH_ATTN"}}, "steps": [{"start": 10, "end": null, "profile": "fast"}]})");
  auto attention = Attention::Create(layer("self"), base_config(), &s, selector);
  ASSERT_FALSE(attention.ok());
  EXPECT_EQ(attention.status().code(), ErrorCode::kUnsupported) << attention.status().message();
  for (const char* part : {"schedule profile 'fast' (steps [10, end))", "role 'self'", "FLASH_ATTN"}) {
    EXPECT_NE(attention.status().message().find(part), std::string::npos) << attention.status().message();
  }
  EXPECT_TRUE(calls_.backends.empty());
}

TEST_F(ScheduleLayerTest, TheLogNamesTheProfileAndItsRanges) {
  Selector selector(make_platform(testing::described_cpu(), registry_), &registry_);
  const AttentionSchedule s = schedule(kSageFromStep3);
  testing::LogCapture log;
  ASSERT_TRUE(Attention::Create(layer("self"), base_config(), &s, selector).ok());
  EXPECT_EQ(log.lines_with("Resolved diffusion attention backend 'TORCH_SDPA' for role='self' (role_category='self') "
                           "via attention_config.default")
                .size(),
            1u);
  EXPECT_EQ(log.lines_with("Resolved diffusion attention backend 'SAGE_ATTN' for role='self' (role_category='self') "
                           "via schedule profile 'sage' (steps [3, 6)): attention_config.default")
                .size(),
            1u);
}

}  // namespace
}  // namespace diffattn
