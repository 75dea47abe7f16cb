// `diffattn tune`: the configuration it writes gives each role its verdict, reloads through
// --diffusion-attention-config @FILE to the same resolution, and warns when its tuning record names
// another platform; bad requests write nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace diffattn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CliResult;
using testing::run_cli;

class TuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diffattn_tune_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  CliResult tune(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"tune", "--model", "tiny-dit", "--platform", "cpu", "--layers", "1",
                                     "--warmup", "0", "--repeats", "1", "--out-dir", path("run")};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  }

  static json read_json(const std::string& file) {
    std::ifstream in(file);
    return json::parse(in, nullptr, /*allow_exceptions=*/false);
  }

  fs::path dir_;
};

TEST_F(TuneCli, WritesEachRolesVerdictAndReloadsToTheSameResolution) {
  const std::string config_path = path("tuned/wan.json");
  const CliResult run = tune({"--output", config_path});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const json config = read_json(config_path);
  const json record = read_json(path("tuned/wan.tuning.json"));
  ASSERT_TRUE(config.is_object()) << config_path;
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record.at("tuned_on").at("kind"), "cpu");
  EXPECT_EQ(record.at("quality_bound"), 1e-2);
  ASSERT_EQ(record.at("roles").size(), config.at("per_role").size());
  for (const json& role : record.at("roles")) {
    const std::string name = role.at("role");
    const std::string want = role.at("chosen").is_null() ? "TORCH_SDPA" : role.at("chosen").get<std::string>();
    EXPECT_EQ(config.at("per_role").at(name).at("backend"), want) << name;
    ASSERT_FALSE(role.at("candidates").empty());
    for (const json& c : role.at("candidates"))
      if (c.at("error") == "") EXPECT_GT(c.at("median_ms").get<double>(), 0.0);
  }

  const CliResult resolved = run_cli({"resolve", "--model", "tiny-dit", "--platform", "cpu", "--json",
                                      "--diffusion-attention-config", "@" + config_path});
  ASSERT_EQ(resolved.exit_code, 0) << resolved.err;
  EXPECT_EQ(resolved.err.find("tuned on"), std::string::npos) << resolved.err;
  const json resolutions = resolved.json().at("resolutions");  // a copy: json() returns a temporary
  for (const json& r : resolutions) {
    EXPECT_EQ(r.at("backend"), config.at("per_role").at(r.at("role").get<std::string>()).at("backend"));
    EXPECT_EQ(r.at("source"), "per_role");
  }
}

TEST_F(TuneCli, AConfigurationTunedOnAnotherPlatformWarnsWhenLoaded) {
  const std::string config_path = path("cfg.json");
  ASSERT_EQ(tune({"--output", config_path}).exit_code, 0);
  json record = read_json(path("cfg.tuning.json"));
  record["tuned_on"] = {{"kind", "cuda"}, {"device_name", "NVIDIA H200"}, {"compute_capability", "9.0"},
                        {"cudnn_version", "9.19.0"}};
  record["description"] = "NVIDIA H200 (sm_90, 132 SMs, cuDNN 9.19.0)";
  std::ofstream(path("cfg.tuning.json")) << record.dump();
  const CliResult resolved = run_cli({"resolve", "--model", "tiny-dit", "--platform", "cpu",
                                      "--diffusion-attention-config", "@" + config_path});
  EXPECT_EQ(resolved.exit_code, 0) << resolved.err;
  EXPECT_NE(resolved.err.find("was tuned on NVIDIA H200"), std::string::npos) << resolved.err;
  EXPECT_NE(resolved.err.find("re-run diffattn tune"), std::string::npos) << resolved.err;
}

TEST_F(TuneCli, BadRequestsWriteNothing) {
  const CliResult bound = tune({"--output", path("a.json"), "--quality-bound", "-1"});
  EXPECT_EQ(bound.exit_code, 2) << bound.err;
  EXPECT_NE(bound.err.find("--quality-bound"), std::string::npos) << bound.err;
  std::ofstream(path("not-a-folder")) << "x";
  const CliResult output = tune({"--output", path("not-a-folder/b.json")});
  EXPECT_EQ(output.exit_code, 2) << output.err;
  EXPECT_NE(output.err.find("--output"), std::string::npos) << output.err;
  EXPECT_FALSE(fs::exists(path("a.json")));
  EXPECT_FALSE(fs::exists(path("run/report.json")));
}

}  // namespace
}  // namespace diffattn
