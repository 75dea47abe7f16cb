// diffattn run with --diffusion-attention-schedule on the CPU: TORCH_SDPA for the first steps and
// SAGE_ATTN after, checked before anything runs, named in the startup log and in both reports.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace diffattn {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_cli;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() /
                     ("diffattn_schedule_" + name + "_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                      "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// tiny-dit over 4 denoising steps, every step sampled, one layer and one timed call per sample.
std::vector<std::string> tiny_run(const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> args = {"run",      "--platform", "cpu",       "--model",  "tiny-dit", "--num-inference-steps",
                                   "4",        "--sample-steps", "4",     "--layers", "1",        "--warmup",
                                   "0",        "--repeats", "1",          "--out-dir", out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

constexpr const char* kSageFromStep2 =
    R"({"profiles": {"sage": {"default": "SAGE_ATTN"}}, "steps": [{"start": 2, "end": null, "profile": "sage"}]})";

const nlohmann::json* role_result(const nlohmann::json& report, const std::string& role) {
  for (const auto& r : report["roles"])
    if (r["role"] == role) return &r["results"][0];
  return nullptr;
}

TEST(ScheduleRunTest, TwoProfilesOverStepsOnTheCpu) {
  const fs::path out = fresh_dir("two");
  const CliResult r = run_cli(tiny_run(out, {"--diffusion-attention-backend", "TORCH_SDPA",
                                             "--diffusion-attention-schedule", kSageFromStep2, "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json report = r.json();
  ASSERT_FALSE(report.is_discarded()) << r.out;
  EXPECT_EQ(report["configurations"][0]["label"], "scheduled");
  EXPECT_EQ(report["configurations"][0]["schedule"]["steps"][0]["start"], 2);
  EXPECT_EQ(report["workload"]["steps_sampled"], nlohmann::json({0, 1, 2, 3}));
  for (const std::string role : {"self", "cross"}) {
    const nlohmann::json* result = role_result(report, role);
    ASSERT_NE(result, nullptr) << role;
    ASSERT_EQ((*result)["status"], "ok") << result->dump();
    const nlohmann::json& uses = (*result)["schedule"];
    ASSERT_EQ(uses.size(), 2u) << uses.dump();
    EXPECT_TRUE(uses[0]["profile"].is_null());
    EXPECT_EQ(uses[0]["ranges"], "steps [0, 2)");
    EXPECT_EQ(uses[0]["backend"], "TORCH_SDPA");
    EXPECT_EQ(uses[0]["sampled_steps"], nlohmann::json({0, 1}));
    EXPECT_EQ(uses[1]["profile"], "sage");
    EXPECT_EQ(uses[1]["ranges"], "steps [2, end)");
    EXPECT_EQ(uses[1]["backend"], "SAGE_ATTN");
    EXPECT_EQ(uses[1]["sampled_steps"], nlohmann::json({2, 3}));
    // SAGE_ATTN's 8-bit products leave a small error against the baseline: it did run on steps 2 and 3.
    const double rel_l2 = (*result)["quality"]["rel_l2"];
    EXPECT_GT(rel_l2, 1e-4) << role;
    EXPECT_LT(rel_l2, 0.2) << role;
    EXPECT_FALSE((*result)["same_as_baseline"].get<bool>());
  }
  EXPECT_NE(r.err.find("Attention schedule of 'scheduled' for role='self': steps [0, 2) base configuration -> "
                       "TORCH_SDPA; steps [2, end) profile 'sage' -> SAGE_ATTN"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Resolved diffusion attention backend 'SAGE_ATTN' for role='self' (role_category='self') via "
                       "schedule profile 'sage' (steps [2, end)): attention_config.default"),
            std::string::npos)
      << r.err;
  // report.json on disk carries the same record.
  std::ifstream file(out / "report.json");
  const nlohmann::json on_disk = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(on_disk.is_discarded());
  EXPECT_EQ(on_disk["roles"][0]["results"][0]["schedule"][1]["backend"], "SAGE_ATTN");
  fs::remove_all(out);
}

// A schedule whose profiles are all TORCH_SDPA computes exactly the baseline: the schedule, not the
// backend, made the difference above.
TEST(ScheduleRunTest, AScheduleOfTheBaselineBackendMatchesItExactly) {
  const fs::path out = fresh_dir("exact");
  // Two layers per role: each sampled step is recorded once however many layers ran it.
  std::vector<std::string> args = tiny_run(
      out, {"--diffusion-attention-backend", "TORCH_SDPA", "--diffusion-attention-schedule",
            R"({"profiles": {"again": {"default": "TORCH_SDPA"}}, "steps": [{"start": 1, "end": 3, "profile": "again"}]})",
            "--json"});
  *std::find(args.begin(), args.end(), "--layers") = "--layers=all";
  args.erase(std::find(args.begin(), args.end(), "--layers=all") + 1);
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json report = r.json();
  const nlohmann::json* result = role_result(report, "self");
  ASSERT_NE(result, nullptr);
  EXPECT_EQ((*result)["quality"]["rel_l2"], 0.0);
  EXPECT_EQ((*result)["schedule"][0]["ranges"], "steps [0, 1), [3, end)");
  EXPECT_EQ((*result)["schedule"][0]["sampled_steps"], nlohmann::json({0, 3}));
  EXPECT_EQ((*result)["schedule"][1]["sampled_steps"], nlohmann::json({1, 2}));
  fs::remove_all(out);
}

// The runner's calls carry sigma = 1 - step/N: over 4 steps 1, 0.75, 0.5, 0.25, so [0, 0.6) is steps 2 and 3.
TEST(ScheduleRunTest, ASigmaScheduleFollowsTheRunnersNoiseLevels) {
  const fs::path out = fresh_dir("sigma");
  const CliResult r = run_cli(tiny_run(
      out, {"--diffusion-attention-schedule",
            R"({"profiles": {"sage": {"default": "SAGE_ATTN"}}, "sigma": [{"low": 0, "high": 0.6, "profile": "sage"}]})",
            "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json report = r.json();
  const nlohmann::json* result = role_result(report, "self");
  ASSERT_NE(result, nullptr);
  EXPECT_EQ((*result)["schedule"][0]["ranges"], "sigma [0.6, 1]");
  EXPECT_EQ((*result)["schedule"][0]["backend"], "TORCH_SDPA");  // the platform default of the empty base
  EXPECT_EQ((*result)["schedule"][0]["sampled_steps"], nlohmann::json({0, 1}));
  EXPECT_EQ((*result)["schedule"][1]["backend"], "SAGE_ATTN");
  EXPECT_EQ((*result)["schedule"][1]["sampled_steps"], nlohmann::json({2, 3}));
  fs::remove_all(out);
}

TEST(ScheduleRunTest, FileAndDottedFlagsAndTheTextReport) {
  const fs::path out = fresh_dir("file");
  fs::create_directories(out);
  const fs::path file = out / "schedule.json";
  std::ofstream(file) << R"({"profiles": {"sage": {"default": {"backend": "TORCH_SDPA"}}},
                              "steps": [{"start": 3, "profile": "sage"}]})";
  // The dotted flag turns the file's profile into SAGE_ATTN.
  const CliResult r = run_cli(tiny_run(out / "reports", {"--diffusion-attention-schedule", "@" + file.string(),
                                                         "--diffusion-attention-schedule.profiles.sage.default.backend",
                                                         "SAGE_ATTN"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("attention schedule:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sage: steps [3, end)"), std::string::npos) << r.out;  // the startup table
  EXPECT_NE(r.out.find("base: steps [0, 3)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(base configuration)"), std::string::npos) << r.out;  // the report's schedule table
  EXPECT_NE(r.out.find("TORCH_SDPA + SAGE_ATTN (schedule)"), std::string::npos) << r.out;  // the results table
  std::ifstream html(out / "reports" / "report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), {});
  EXPECT_NE(page.find("<h2>Attention schedule</h2>"), std::string::npos);
  EXPECT_NE(page.find("steps [3, end)"), std::string::npos);
  EXPECT_NE(r.out.find("SAGE_ATTN"), std::string::npos) << r.out;
  fs::remove_all(out);
}

TEST(ScheduleRunTest, RefusedBeforeAnythingRuns) {
  const fs::path out = fresh_dir("refused");
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {{"--diffusion-attention-schedule",
        R"({"profiles": {"sage": {"default": "SAGE_ATTN"}}, "steps": [{"start": 0, "profile": "sparse"}]})"},
       2,
       {"unknown profile 'sparse'", "defined: 'sage'"}},
      {{"--diffusion-attention-schedule",
        R"({"profiles": {"fast": {"default": "FLASH_ATTN"}}, "steps": [{"start": 2, "profile": "fast"}]})"},
       3,
       {"schedule profile 'fast' (steps [2, end))", "role 'self'", "FLASH_ATTN"}},
      {{"--diffusion-attention-schedule", "@" + (out / "missing.json").string()}, 2,
       {"--diffusion-attention-schedule @", "no such file"}},
  };
  for (const Case& c : cases) {
    const CliResult r = run_cli(tiny_run(out, c.args));
    EXPECT_EQ(r.exit_code, c.exit_code) << r.out << r.err;
    for (const std::string& part : c.parts) EXPECT_NE(r.err.find(part), std::string::npos) << part << "\n" << r.err;
    EXPECT_EQ(r.err.find("Baseline for role="), std::string::npos) << "ran anyway: " << r.err;
    EXPECT_FALSE(fs::exists(out / "report.json"));
  }
}

TEST(ScheduleRunTest, ASequenceParallelRunRefusesASchedule) {
  const CliResult r = run_cli({"run", "--platform", "cpu", "--model", "tiny-dit", "--ulysses", "2",
                               "--diffusion-attention-schedule", kSageFromStep2});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("leave out --diffusion-attention-schedule"), std::string::npos) << r.err;
}

TEST(ScheduleRunTest, SubcommandsWithoutStepsRefuseTheFlag) {
  for (const std::string command : {"resolve", "attend", "tune"}) {
    const CliResult r = run_cli({command, "--platform", "cpu", "--diffusion-attention-schedule", kSageFromStep2});
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("only diffattn run executes"), std::string::npos) << command << ": " << r.err;
  }
}

}  // namespace
}  // namespace diffattn
