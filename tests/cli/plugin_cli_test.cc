// `--plugin PATH` on the command line: the plugin's backends are listed, resolve when named, run
// through `attend`, and a missing library is an error with the loader's reason. Each run is its
// own process, so the plugin never enters this test binary's registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "common/npy.h"

namespace diffattn {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_cli;

constexpr const char* kPlugin = DIFFATTN_TEST_PLUGIN_PATH;

TEST(PluginCli, BackendsListsThePluginsBackends) {
  const CliResult run = run_cli({"backends", "--platform", "cpu", "--plugin", kPlugin, "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = run.json();
  std::vector<std::string> names;
  for (const auto& b : doc.at("backends")) names.push_back(b.at("name"));
  EXPECT_NE(std::find(names.begin(), names.end(), "TEST_NAIVE_ATTN"), names.end()) << run.out;
  EXPECT_NE(std::find(names.begin(), names.end(), "TORCH_SDPA"), names.end()) << run.out;
}

TEST(PluginCli, ResolvesWhenNamedAndOnlyThen) {
  const std::vector<std::string> base = {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--json"};
  std::vector<std::string> named = base;
  named.insert(named.end(), {"--plugin", kPlugin, "--diffusion-attention-backend", "TEST_NAIVE_ATTN"});
  const CliResult run = run_cli(named);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.json()["resolutions"][0]["backend"], "TEST_NAIVE_ATTN") << run.out;
  EXPECT_EQ(run.json()["resolutions"][0]["source"], "default") << run.out;

  std::vector<std::string> loaded_only = base;
  loaded_only.insert(loaded_only.end(), {"--plugin", kPlugin});
  const CliResult by_default = run_cli(loaded_only);
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_EQ(by_default.json()["resolutions"][0]["backend"], "TORCH_SDPA") << by_default.out;

  std::vector<std::string> not_loaded = base;
  not_loaded.insert(not_loaded.end(), {"--diffusion-attention-backend", "TEST_NAIVE_ATTN"});
  const CliResult unknown = run_cli(not_loaded);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  EXPECT_NE(unknown.err.find("TEST_NAIVE_ATTN"), std::string::npos) << unknown.err;
}

TEST(PluginCli, MissingLibraryIsAnErrorWithTheLoadersReason) {
  const CliResult run = run_cli({"backends", "--platform", "cpu", "--plugin", "/no/such/plugin.so", "--json"});
  EXPECT_EQ(run.exit_code, 3) << run.out;
  EXPECT_EQ(run.json()["error"]["code"], "unavailable") << run.out;
  EXPECT_NE(run.err.find("/no/such/plugin.so"), std::string::npos) << run.err;
}

TEST(PluginCli, AttendRunsThePluginAndMatchesTorchSdpa) {
  const fs::path dir = fs::temp_directory_path() / ("diffattn_plugin_cli_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const char* name : {"q", "k", "v"}) {
    npy::Array a;
    a.type = npy::ElementType::kFloat32;
    a.shape = {1, 24, 2, 32};
    std::vector<float> values(static_cast<std::size_t>(a.numel()));
    for (float& x : values) x = normal(rng);
    const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
    a.data.assign(bytes, bytes + values.size() * sizeof(float));
    ASSERT_TRUE(npy::write_file((dir / (std::string(name) + ".npy")).string(), a).ok());
  }
  auto attend = [&](const std::string& backend, const std::string& out) {
    return run_cli({"attend", "--platform", "cpu", "--plugin", kPlugin, "--backend", backend, "--causal", "--q",
                    (dir / "q.npy").string(), "--k", (dir / "k.npy").string(), "--v", (dir / "v.npy").string(),
                    "--out", (dir / out).string()});
  };
  const CliResult plugin = attend("TEST_NAIVE_ATTN", "plugin.npy");
  ASSERT_EQ(plugin.exit_code, 0) << plugin.err;
  const CliResult sdpa = attend("TORCH_SDPA", "sdpa.npy");
  ASSERT_EQ(sdpa.exit_code, 0) << sdpa.err;
  auto a = npy::read_file((dir / "plugin.npy").string());
  auto b = npy::read_file((dir / "sdpa.npy").string());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->data.size(), b->data.size());
  const auto* x = reinterpret_cast<const float*>(a->data.data());
  const auto* y = reinterpret_cast<const float*>(b->data.data());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a->data.size() / sizeof(float); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  EXPECT_GT(den, 0.0);
  EXPECT_LT(std::sqrt(num / den), 1e-5);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace diffattn
