#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "runner/configurations.h"
#include "runner/report_format.h"
#include "runner/report_html.h"
#include "runner/report_json.h"
#include "runner/report_text.h"
#include "runner/workload_runner.h"

namespace diffattn::runner {
namespace {

// A tiny CPU run comparing TORCH_SDPA, the platform default and a backend the CPU cannot run.
class TinyRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RunRequest r;
    r.model = "tiny-dit";
    r.height = 64;
    r.width = 64;
    r.frames = 5;
    r.layers = "1";
    r.warmup = 0;
    r.repeats = 2;
    r.seed = 123;
    r.compare = {"TORCH_SDPA", "auto", "CUDNN_ATTN"};
    const PlatformInfo info = probe_cpu_platform();
    auto configs = make_configurations(AttentionConfig{}, r.compare, info, global_registry());
    ASSERT_TRUE(configs.ok()) << configs.status().message();
    auto plan = plan_workload(r, false, static_cast<int>(configs->size()));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    last_done_ = last_total_ = 0;
    auto report = execute_workload(r, *plan, make_platform(info, global_registry()), *configs,
                                   [](std::int64_t done, std::int64_t total, const std::string&) {
                                     EXPECT_LE(done, total);
                                     last_done_ = done;
                                     last_total_ = total;
                                   });
    ASSERT_TRUE(report.ok()) << report.status().message();
    report_ = new RunReport(std::move(report).value());
  }
  static void TearDownTestSuite() {
    delete report_;
    report_ = nullptr;
  }

  static RunReport* report_;
  static std::int64_t last_done_, last_total_;
};

RunReport* TinyRun::report_ = nullptr;
std::int64_t TinyRun::last_done_ = 0;
std::int64_t TinyRun::last_total_ = 0;

TEST_F(TinyRun, EveryRoleHasABaselineAndOneRunPerConfiguration) {
  ASSERT_NE(report_, nullptr);
  ASSERT_EQ(report_->roles.size(), 2u);
  for (const RoleReport& role : report_->roles) {
    EXPECT_TRUE(role.baseline.ok()) << role.baseline.error;
    EXPECT_EQ(role.baseline.backend, "TORCH_SDPA");
    EXPECT_EQ(role.baseline.times_ms.size(), 2u);
    ASSERT_EQ(role.runs.size(), 3u);
    EXPECT_TRUE(role.runs[0].ok());
    // TORCH_SDPA with no options, explicit or as the CPU's default, is the baseline's own computation.
    for (int i : {0, 1}) {
      EXPECT_TRUE(role.runs[i].same_as_baseline) << i;
      EXPECT_EQ(role.runs[i].times_ms, role.baseline.times_ms) << i;
      EXPECT_EQ(role.runs[i].quality.rel_l2, 0.0);
      EXPECT_GT(role.runs[i].quality.elements, 0);
    }
    EXPECT_FALSE(role.runs[2].same_as_baseline);
    EXPECT_FALSE(role.runs[2].ok());  // CUDNN_ATTN cannot run on a CPU: recorded with the reason
    EXPECT_FALSE(role.runs[2].error.empty());
    ASSERT_TRUE(role.verdict.configuration.has_value());
    EXPECT_NE(*role.verdict.configuration, "CUDNN_ATTN");
  }
  // Only calls that ran count: the baseline's, per role; the others repeat it or cannot run.
  EXPECT_EQ(last_total_, 2 * 2);
  EXPECT_EQ(last_done_, last_total_);
}

TEST_F(TinyRun, JsonCarriesEveryFigureAndParses) {
  ASSERT_NE(report_, nullptr);
  const nlohmann::json doc = nlohmann::json::parse(report_to_json(*report_).dump());
  EXPECT_EQ(doc.at("workload").at("model"), "tiny-dit");
  EXPECT_EQ(doc.at("workload").at("video_tokens"), 2 * 4 * 4);
  EXPECT_EQ(doc.at("workload").at("seed"), 123);
  const auto& role = doc.at("roles").at(0);
  EXPECT_EQ(role.at("baseline").at("backend"), "TORCH_SDPA");
  const auto& first = role.at("results").at(0);
  for (const char* key : {"time_ms", "tflops", "share_of_step", "speedup_vs_baseline", "quality", "resolution"})
    EXPECT_TRUE(first.contains(key)) << key;
  for (const char* key : {"rel_l2", "cosine", "max_abs", "psnr_db"}) EXPECT_TRUE(first.at("quality").contains(key)) << key;
  EXPECT_EQ(role.at("results").at(2).at("status"), "failed");
  EXPECT_TRUE(role.at("verdict").at("reason").is_string());
  EXPECT_EQ(doc.at("step_summary").size(), 4u);
  double shares = 0;
  for (const auto& r : doc.at("roles")) shares += r.at("results").at(0).at("share_of_step").get<double>();
  EXPECT_NEAR(shares, 1.0, 1e-9);
}

TEST_F(TinyRun, HtmlHoldsTheChartsAndEveryRole) {
  ASSERT_NE(report_, nullptr);
  const std::string html = report_to_html(*report_);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Time per attention call"), std::string::npos);
  EXPECT_NE(html.find("relative L2 error"), std::string::npos);
  EXPECT_NE(html.find(">cross<"), std::string::npos);
  EXPECT_NE(html.find("CUDNN_ATTN"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

TEST_F(TinyRun, TerminalTableShowsVerdicts) {
  ASSERT_NE(report_, nullptr);
  const std::string text = report_to_text(*report_);
  EXPECT_NE(text.find("verdict"), std::string::npos);
  EXPECT_NE(text.find("relL2"), std::string::npos);
  EXPECT_NE(text.find("attention/step"), std::string::npos);
  EXPECT_NE(text.find("TORCH_SDPA (baseline)"), std::string::npos) << text;
  EXPECT_NE(text.find("= baseline"), std::string::npos) << text;
  EXPECT_NE(text.find("the baseline's own computation"), std::string::npos) << text;
}

TEST(ReportFormat, TimesKeepThreeDigitsInAPlainUnit) {
  EXPECT_EQ(fmt_ms(0.5123), "512.3 us");
  EXPECT_EQ(fmt_ms(4.554), "4.55 ms");
  EXPECT_EQ(fmt_ms(999.4), "999 ms");
  EXPECT_EQ(fmt_ms(23612.0), "23.6 s");
  EXPECT_EQ(fmt_ms(2361234.0), "2361 s");
  for (double ms : {0.0123, 0.9999, 999.7, 1234.5, 99990.0, 1e7})
    EXPECT_EQ(fmt_ms(ms).find('e'), std::string::npos) << fmt_ms(ms);
}

TEST(Configurations, CompareEntriesReplaceTheDefaultAndKeepPerRole) {
  AttentionConfig user;
  AttentionSpec cross;
  cross.backend = "TORCH_SDPA";
  user.per_role["cross"] = cross;
  const PlatformInfo info = probe_cpu_platform();
  auto configs = make_configurations(user, {"torch_sdpa", "auto"}, info, global_registry());
  ASSERT_TRUE(configs.ok()) << configs.status().message();
  ASSERT_EQ(configs->size(), 2u);
  EXPECT_EQ((*configs)[0].label, "TORCH_SDPA");
  EXPECT_TRUE((*configs)[0].config.default_spec.has_value());
  EXPECT_FALSE((*configs)[1].config.default_spec.has_value());
  EXPECT_EQ((*configs)[1].config.per_role.count("cross"), 1u);
  AttentionConfig with_default = user;
  with_default.default_spec = cross;
  EXPECT_EQ(make_configurations(with_default, {"TORCH_SDPA"}, info, global_registry()).status().code(),
            ErrorCode::kInvalidConfig);
  auto all = make_configurations(AttentionConfig{}, {"all"}, info, global_registry());
  ASSERT_TRUE(all.ok());
  bool has_sdpa = false;
  for (const auto& c : *all) has_sdpa |= c.label == "TORCH_SDPA";
  EXPECT_TRUE(has_sdpa);
}

}  // namespace
}  // namespace diffattn::runner
