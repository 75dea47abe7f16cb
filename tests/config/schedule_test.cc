// The attention schedule: its JSON and dotted surfaces, every validation rule, and which range a
// step falls in.

#include <gtest/gtest.h>

#include <string>

#include "config/config_test_util.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/schedule.h"

namespace diffattn {
namespace {

DenoisingStep step_at(std::int64_t index, std::int64_t num_steps = 0, std::optional<double> sigma = std::nullopt) {
  DenoisingStep step;
  step.index = index;
  step.num_steps = num_steps;
  step.sigma = sigma;
  return step;
}


using testing_config::expect_config_error;

Result<std::optional<AttentionSchedule>> from_text(const std::string& text) {
  ScheduleSources sources;
  sources.json = text;
  return parse_attention_schedule(sources, global_registry());
}

AttentionSchedule valid(const std::string& text) {
  auto schedule = from_text(text);
  EXPECT_TRUE(schedule.ok()) << schedule.status().message();
  if (!schedule.ok() || !schedule.value()) {
    ADD_FAILURE() << "expected a schedule from " << text;
    return {};
  }
  return *schedule.value();
}

// Two profiles over 12 steps, given out of order; steps 4 and 5 are left to the base configuration.
constexpr const char* kDenseThenSage = R"({
  "profiles": {"dense": {"default": "TORCH_SDPA"},
               "late": {"default": {"backend": "SAGE_ATTN"}, "per_role": {"cross": "TORCH_SDPA"}}},
  "steps": [{"start": 6, "end": null, "profile": "late"}, {"start": 0, "end": 4, "profile": "dense"}]})";

std::optional<std::string> profile_at(const AttentionSchedule& s, std::int64_t step) {
  auto range = s.range_for(step_at(step));
  EXPECT_TRUE(range.ok()) << range.status().message();
  if (!range.ok() || !range.value()) return std::nullopt;
  return s.range_profile(**range);
}

std::optional<std::string> profile_at_sigma(const AttentionSchedule& s, double sigma) {
  auto range = s.range_for(step_at(0, 0, sigma));
  EXPECT_TRUE(range.ok()) << range.status().message();
  if (!range.ok() || !range.value()) return std::nullopt;
  return s.range_profile(**range);
}

TEST(ScheduleParseTest, ProfilesAreWholeConfigurationsAndRangesAreSorted) {
  const AttentionSchedule s = valid(kDenseThenSage);
  ASSERT_EQ(s.profiles.size(), 2u);
  EXPECT_EQ(s.profiles.at("dense").default_spec->backend, "TORCH_SDPA");
  EXPECT_EQ(s.profiles.at("late").default_spec->backend, "SAGE_ATTN");
  EXPECT_EQ(s.profiles.at("late").per_role.at("cross").backend, "TORCH_SDPA");
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(s.steps[0].profile, "dense");
  EXPECT_EQ(s.steps[0].start, 0);
  EXPECT_EQ(s.steps[0].end, 4);
  EXPECT_EQ(s.steps[1].profile, "late");
  EXPECT_FALSE(s.steps[1].end.has_value());
  EXPECT_FALSE(s.by_sigma());
}

TEST(ScheduleParseTest, EndIsExclusiveAndUncoveredStepsGoToTheBase) {
  const AttentionSchedule s = valid(kDenseThenSage);
  EXPECT_EQ(profile_at(s, 0), "dense");
  EXPECT_EQ(profile_at(s, 3), "dense");
  EXPECT_EQ(profile_at(s, 4), std::nullopt);  // end 4 is exclusive
  EXPECT_EQ(profile_at(s, 5), std::nullopt);
  EXPECT_EQ(profile_at(s, 6), "late");
  EXPECT_EQ(profile_at(s, 1000), "late");  // open end
  EXPECT_EQ(base_ranges_text(s), "steps [4, 6)");
  EXPECT_EQ(profile_ranges_text(s, "late"), "steps [6, end)");
  EXPECT_EQ(schedule_range_text(s, 0), "steps [0, 4)");
}

TEST(ScheduleParseTest, AProfileMayCoverSeveralRanges) {
  const AttentionSchedule s = valid(R"({"profiles": {"p": {"default": "SAGE_ATTN"}},
    "steps": [{"start": 20, "profile": "p"}, {"start": 0, "end": 2, "profile": "p"}]})");
  EXPECT_EQ(profile_ranges_text(s, "p"), "steps [0, 2), [20, end)");
  EXPECT_EQ(base_ranges_text(s), "steps [2, 20)");
  EXPECT_EQ(profile_at(s, 1), "p");
  EXPECT_EQ(profile_at(s, 2), std::nullopt);
  EXPECT_EQ(profile_at(s, 19), std::nullopt);
}

TEST(ScheduleParseTest, AScheduleCoveringEveryStepLeavesNothingToTheBase) {
  const AttentionSchedule steps = valid(R"({"profiles": {"a": {"default": "TORCH_SDPA"}, "b": {"default": "SAGE_ATTN"}},
    "steps": [{"start": 0, "end": 5, "profile": "a"}, {"start": 5, "end": null, "profile": "b"}]})");
  EXPECT_EQ(base_ranges_text(steps), "");
  EXPECT_EQ(profile_at(steps, 4), "a");
  EXPECT_EQ(profile_at(steps, 5), "b");
  const AttentionSchedule sigma = valid(R"({"profiles": {"a": {"default": "TORCH_SDPA"}},
    "sigma": [{"low": 0, "high": 1, "profile": "a"}]})");
  EXPECT_EQ(base_ranges_text(sigma), "");
  // A schedule that stops early leaves the steps after it to the base.
  const AttentionSchedule early = valid(R"({"profiles": {"a": {"default": "TORCH_SDPA"}},
    "steps": [{"start": 0, "end": 3, "profile": "a"}]})");
  EXPECT_EQ(base_ranges_text(early), "steps [3, end)");
}

TEST(ScheduleParseTest, SigmaWindowsAreHalfOpenExceptAtOne) {
  const AttentionSchedule s = valid(R"({"profiles": {"early": {"default": "TORCH_SDPA"}, "late": {"default": "SAGE_ATTN"}},
    "sigma": [{"low": 0.0, "high": 0.25, "profile": "late"}, {"low": 0.5, "high": 1.0, "profile": "early"}]})");
  ASSERT_TRUE(s.by_sigma());
  EXPECT_EQ(profile_at_sigma(s, 1.0), "early");  // high == 1 includes 1
  EXPECT_EQ(profile_at_sigma(s, 0.5), "early");
  EXPECT_EQ(profile_at_sigma(s, 0.49), std::nullopt);
  EXPECT_EQ(profile_at_sigma(s, 0.25), std::nullopt);  // high 0.25 is exclusive
  EXPECT_EQ(profile_at_sigma(s, 0.0), "late");
  EXPECT_EQ(base_ranges_text(s), "sigma [0.25, 0.5)");
  EXPECT_EQ(schedule_range_text(s, 1), "sigma [0.5, 1]");
}

TEST(ScheduleParseTest, ASigmaScheduleNeedsTheCallsSigmaInTheUnitInterval) {
  const AttentionSchedule s = valid(R"({"profiles": {"p": {"default": "SAGE_ATTN"}},
    "sigma": [{"low": 0.2, "high": 0.6, "profile": "p"}]})");
  auto missing = s.range_for(step_at(7));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(missing.status().message().find("carries no sigma"), std::string::npos) << missing.status().message();
  auto too_big = s.range_for(step_at(0, 0, 14.6));
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("[0, 1]"), std::string::npos) << too_big.status().message();
}

TEST(ScheduleParseTest, EmptyMeansNoSchedule) {
  for (const char* text : {"null", "{}", R"({"profiles": {}, "steps": []})", R"({"steps": null})"}) {
    auto s = from_text(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status().message();
    EXPECT_FALSE(s->has_value()) << text;
  }
  auto none = parse_attention_schedule(ScheduleSources{}, global_registry());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ScheduleParseTest, PrintsBackToAnEqualSchedule) {
  for (const char* text : {kDenseThenSage, R"({"profiles": {"p": {"default": "SAGE_ATTN"}},
                            "sigma": [{"low": 0.125, "high": 1, "profile": "p"}]})"}) {
    const AttentionSchedule s = valid(text);
    auto again = schedule_from_json(schedule_to_json(s), global_registry());
    ASSERT_TRUE(again.ok()) << again.status().message();
    ASSERT_TRUE(again->has_value());
    EXPECT_EQ(**again, s);
  }
}

TEST(ScheduleSourcesTest, DottedFlagsBuildOrAmendTheSchedule) {
  ScheduleSources dotted_only;
  dotted_only.dotted = {{"profiles.sparse.default.backend", "SAGE_ATTN"},
                        {"steps", R"([{"start": 3, "end": null, "profile": "sparse"}])"}};
  auto s = parse_attention_schedule(dotted_only, global_registry());
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(s->has_value());
  EXPECT_EQ((*s)->profiles.at("sparse").default_spec->backend, "SAGE_ATTN");
  EXPECT_EQ((*s)->steps.at(0).start, 3);

  // A dotted flag replaces one value of the JSON object: here the late profile's backend.
  ScheduleSources amended;
  amended.json = kDenseThenSage;
  amended.dotted = {{"profiles.late.default.backend", "TORCH_SDPA"}};
  auto a = parse_attention_schedule(amended, global_registry());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ((*a)->profiles.at("late").default_spec->backend, "TORCH_SDPA");
  EXPECT_EQ((*a)->profiles.at("late").per_role.at("cross").backend, "TORCH_SDPA");
}

TEST(ScheduleSourcesTest, DottedErrorsNameTheScheduleFlag) {
  ScheduleSources sources;
  sources.dotted = {{"profiles..default", "X"}};
  expect_config_error(parse_attention_schedule(sources, global_registry()).status(),
                      {"--diffusion-attention-schedule.profiles..default", "empty path segment"});
  ScheduleSources not_object;
  not_object.json = "[1, 2]";
  expect_config_error(parse_attention_schedule(not_object, global_registry()).status(),
                      {"--diffusion-attention-schedule must be a JSON object", "Example"});
}

struct BadSchedule {
  const char* name;
  const char* json;
  std::vector<std::string_view> fragments;
};

class ScheduleRejectsTest : public ::testing::TestWithParam<BadSchedule> {};

TEST_P(ScheduleRejectsTest, BeforeAnythingRunsWithWhatToWrite) {
  auto s = from_text(GetParam().json);
  ASSERT_FALSE(s.ok()) << GetParam().name << " was accepted";
  EXPECT_EQ(s.status().code(), ErrorCode::kInvalidConfig) << s.status().message();
  for (std::string_view fragment : GetParam().fragments) {
    EXPECT_NE(s.status().message().find(fragment), std::string::npos)
        << GetParam().name << "\nmessage: " << s.status().message() << "\nmissing: " << fragment;
  }
}

#define PROFILE_P R"("profiles": {"p": {"default": "SAGE_ATTN"}})"

INSTANTIATE_TEST_SUITE_P(
    EveryRule, ScheduleRejectsTest,
    ::testing::Values(
        BadSchedule{"unknown_profile", R"({"profiles": {"p": {"default": "SAGE_ATTN"}},
           "steps": [{"start": 0, "end": null, "profile": "sparse"}, {"start": 0, "end": null, "profile": "p"}]})",
                    {"attention_schedule.steps[0]", "unknown profile 'sparse'", "defined: 'p'"}},
        BadSchedule{"range_without_profiles", R"({"steps": [{"start": 0, "profile": "sparse"}]})",
                    {"unknown profile 'sparse'", "defines no profiles", "profiles"}},
        BadSchedule{"overlap", "{" PROFILE_P R"(, "steps": [{"start": 0, "end": 11, "profile": "p"},
                                                           {"start": 10, "end": 20, "profile": "p"}]})",
                    {"ranges overlap", "[0, 11)", "[10, 20)", "step 10", "end the first range at 10"}},
        BadSchedule{"open_range_before_another", "{" PROFILE_P R"(, "steps": [{"start": 5, "profile": "p"},
                                                                         {"start": 30, "end": 40, "profile": "p"}]})",
                    {"ranges overlap", "[5, end)", "[30, 40)"}},
        BadSchedule{"sigma_overlap", "{" PROFILE_P R"(, "sigma": [{"low": 0.5, "high": 1, "profile": "p"},
                                                                {"low": 0.1, "high": 0.6, "profile": "p"}]})",
                    {"windows overlap", "[0.1, 0.6)", "[0.5, 1)"}},
        BadSchedule{"mixed", "{" PROFILE_P R"(, "steps": [{"start": 0, "profile": "p"}],
                                              "sigma": [{"low": 0, "high": 1, "profile": "p"}]})",
                    {"steps and sigma cannot be mixed", "Keep one list"}},
        BadSchedule{"start_after_end", "{" PROFILE_P R"(, "steps": [{"start": 12, "end": 3, "profile": "p"}]})",
                    {"attention_schedule.steps[0]", "end (3) must be greater than start (12)", "end is exclusive"}},
        BadSchedule{"empty_range", "{" PROFILE_P R"(, "steps": [{"start": 4, "end": 4, "profile": "p"}]})",
                    {"must be greater than start", "\"end\": 5"}},
        BadSchedule{"negative_start", "{" PROFILE_P R"(, "steps": [{"start": -1, "profile": "p"}]})",
                    {"start must be >= 0"}},
        BadSchedule{"missing_start", "{" PROFILE_P R"(, "steps": [{"end": 4, "profile": "p"}]})",
                    {"start is required"}},
        BadSchedule{"start_as_string", "{" PROFILE_P R"(, "steps": [{"start": "10", "profile": "p"}]})",
                    {"start", "string"}},
        BadSchedule{"fractional_end", "{" PROFILE_P R"(, "steps": [{"start": 1, "end": 2.5, "profile": "p"}]})",
                    {"end"}},
        BadSchedule{"profile_as_number", "{" PROFILE_P R"(, "steps": [{"start": 1, "profile": 3}]})",
                    {"profile must name one of the schedule's profiles", "number"}},
        BadSchedule{"steps_not_a_list", "{" PROFILE_P R"(, "steps": {"start": 1, "profile": "p"}})",
                    {"attention_schedule.steps", "expected a list of ranges"}},
        BadSchedule{"range_not_an_object", "{" PROFILE_P R"(, "steps": [10]})",
                    {"attention_schedule.steps[0]", "expected a range object"}},
        BadSchedule{"unknown_range_key", "{" PROFILE_P R"(, "steps": [{"start": 1, "stop": 4, "profile": "p"}]})",
                    {"stop"}},
        BadSchedule{"unknown_top_key", "{" PROFILE_P R"(, "default": [{"start": 1, "profile": "p"}]})",
                    {"default"}},
        BadSchedule{"sigma_out_of_unit", "{" PROFILE_P R"(, "sigma": [{"low": 0.5, "high": 14.6, "profile": "p"}]})",
                    {"0 <= low < high <= 1", "high 14.6"}},
        BadSchedule{"sigma_low_not_below_high", "{" PROFILE_P R"(, "sigma": [{"low": 0.5, "high": 0.5, "profile": "p"}]})",
                    {"0 <= low < high <= 1"}},
        BadSchedule{"sigma_missing_high", "{" PROFILE_P R"(, "sigma": [{"low": 0.5, "profile": "p"}]})",
                    {"high is required"}},
        BadSchedule{"profiles_not_an_object", R"({"profiles": ["p"], "steps": []})",
                    {"attention_schedule.profiles", "expected an object mapping profile names"}},
        BadSchedule{"profile_as_backend_name", R"({"profiles": {"p": "SAGE_ATTN"}, "steps": [{"start": 0, "profile": "p"}]})",
                    {"profiles['p']", "expected an attention configuration object", "{\"default\": \"SAGE_ATTN\"}"}},
        BadSchedule{"bad_profile_name", R"({"profiles": {"9late": {"default": "SAGE_ATTN"}}, "steps": []})",
                    {"profile name '9late' is not valid", "start with an ASCII letter"}},
        BadSchedule{"profile_with_bad_config", R"({"profiles": {"p": {"default": {"backend": "SAGE_ATTN",
           "fastvideo_vsa_topk": 4}}}, "steps": [{"start": 0, "profile": "p"}]})",
                    {"attention_schedule.profiles['p']: ", "fastvideo_vsa_topk", "FASTVIDEO_VSA"}},
        BadSchedule{"unused_profile", R"({"profiles": {"p": {"default": "SAGE_ATTN"}, "q": {"default": "TORCH_SDPA"}},
           "steps": [{"start": 0, "profile": "p"}]})",
                    {"profiles['q']", "no range uses this profile", "or remove it"}},
        BadSchedule{"not_an_object", R"("SAGE_ATTN")", {"must be a JSON object"}}),
    [](const ::testing::TestParamInfo<BadSchedule>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace diffattn
