// What a new user meets first: one name per backend with a hint for typos, attend built as a
// layer for its --role with conflicting choices refused, dtype conversion said out loud, the run's
// baseline labelled as such, and the small conveniences (@file, --version, case-insensitive
// --platform, a plugin in the current folder, JSON shapes as arrays, kernels missing from a build).

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_runner.h"
#include "common/npy.h"
#include "kernels/cpu/half_convert.h"
#include "parity/oracle.h"

namespace diffattn::testing {
namespace {

namespace fs = std::filesystem;

class FirstContact : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diffattn_first_contact_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Fresh normal values written as `type` (float32, float16 or float64); returns them as floats.
  std::vector<float> write_random(const std::string& name, std::vector<std::int64_t> shape,
                                  npy::ElementType type = npy::ElementType::kFloat32) {
    npy::Array a;
    a.type = type;
    a.shape = std::move(shape);
    std::vector<float> values(static_cast<std::size_t>(a.numel()));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : values) v = normal(rng_);
    a.data.resize(values.size() * npy::element_size(type));
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (type == npy::ElementType::kFloat64) {
        reinterpret_cast<double*>(a.data.data())[i] = values[i];
      } else if (type == npy::ElementType::kFloat16) {
        const std::uint16_t h = cpu::float_to_half(values[i]);
        reinterpret_cast<std::uint16_t*>(a.data.data())[i] = h;
        values[i] = cpu::half_to_float(h);
      } else {
        reinterpret_cast<float*>(a.data.data())[i] = values[i];
      }
    }
    EXPECT_TRUE(npy::write_file(path(name), a).ok());
    return values;
  }

  std::vector<std::string> attend_args(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"attend", "--platform", "cpu", "--q", path("q.npy"), "--k", path("k.npy"),
                                     "--v", path("v.npy"), "--out", path("out.npy")};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  void write_qkv() {
    write_random("q.npy", {1, 6, 2, 16});
    write_random("k.npy", {1, 7, 2, 16});
    write_random("v.npy", {1, 7, 2, 16});
  }

  fs::path dir_;
  std::mt19937 rng_{std::random_device{}()};
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(FirstContact, AttendRefusesASecondChoiceForTheSameRole) {
  write_qkv();
  struct Case {
    std::vector<std::string> flags;
    std::string names;
  };
  const std::vector<Case> conflicts = {
      {{"--backend", "TORCH_SDPA", "--diffusion-attention-backend", "TORCH_SDPA"}, "--diffusion-attention-backend"},
      {{"--backend", "TORCH_SDPA", "--diffusion-attention-config", R"({"default":{"backend":"TORCH_SDPA"}})"},
       "default.backend"},
      {{"--backend", "TORCH_SDPA", "--diffusion-attention-config.per_role.self.backend", "TORCH_SDPA"},
       "per_role.self"},
      {{"--backend", "TORCH_SDPA", "--role", "ltx2.audio_to_video:cross", "--diffusion-attention-config",
        R"({"per_role":{"cross":{"backend":"TORCH_SDPA"}}})"},
       "per_role.cross"},
  };
  for (const Case& c : conflicts) {
    const CliResult run = run_cli(attend_args(c.flags));
    EXPECT_EQ(run.exit_code, 2) << c.names << ": " << run.err;
    EXPECT_TRUE(contains(run.err, "--backend TORCH_SDPA and " + c.names)) << run.err;
    EXPECT_FALSE(fs::exists(path("out.npy"))) << c.names;
  }
  // A per_role entry for another role is no conflict.
  const CliResult other = run_cli(attend_args(
      {"--backend", "TORCH_SDPA", "--diffusion-attention-config.per_role.cross.backend", "TORCH_SDPA", "--json"}));
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_EQ(other.json()["source"], "per_role") << other.out;
}

TEST_F(FirstContact, AttendAppliesTheConfigurationOfItsRole) {
  write_qkv();
  const std::string config = R"({"per_role":{"cross":{"backend":"TORCH_SDPA"}}})";
  const CliResult cross = run_cli(attend_args({"--role", "cross", "--diffusion-attention-config", config, "--json"}));
  ASSERT_EQ(cross.exit_code, 0) << cross.err;
  EXPECT_EQ(cross.json()["role"], "cross");
  EXPECT_EQ(cross.json()["source"], "per_role");
  const CliResult by_category =
      run_cli(attend_args({"--role", "ltx2.audio_to_video:cross", "--diffusion-attention-config", config, "--json"}));
  ASSERT_EQ(by_category.exit_code, 0) << by_category.err;
  EXPECT_EQ(by_category.json()["source"], "category");
  const CliResult self = run_cli(attend_args({"--diffusion-attention-config", config, "--json"}));
  ASSERT_EQ(self.exit_code, 0) << self.err;
  EXPECT_EQ(self.json()["role"], "self");
  EXPECT_EQ(self.json()["source"], "platform");
  EXPECT_EQ(run_cli(attend_args({"--role", "x:"})).exit_code, 2);
}

TEST_F(FirstContact, AttendJsonGivesShapesAsArrays) {
  write_qkv();
  const CliResult run = run_cli(attend_args({"--json"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = run.json();
  EXPECT_EQ(doc["q"], nlohmann::json({1, 6, 2, 16}));
  EXPECT_EQ(doc["k"], nlohmann::json({1, 7, 2, 16}));
  EXPECT_EQ(doc["out_shape"], nlohmann::json({1, 6, 2, 16}));
}

TEST_F(FirstContact, UnknownNamesGetTheNearestNameOnEverySurface) {
  write_qkv();
  const std::vector<std::vector<std::string>> surfaces = {
      {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--diffusion-attention-backend", "SDPA"},
      {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--diffusion-attention-config",
       R"({"per_role":{"self":{"backend":"torch_spda"}}})"},
      attend_args({"--backend", "sdpa"}),
  };
  for (const auto& args : surfaces) {
    const CliResult run = run_cli(args);
    EXPECT_EQ(run.exit_code, 2) << args[0] << ": " << run.err;
    EXPECT_TRUE(contains(run.err, "Did you mean 'TORCH_SDPA'?")) << run.err;
  }
  const CliResult far = run_cli({"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64",
                                 "--diffusion-attention-backend", "QQQQQ"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_FALSE(contains(far.err, "Did you mean")) << far.err;
}

TEST_F(FirstContact, LogsNameTorchSdpaAsEveryTableDoes) {
  const CliResult run = run_cli({"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(contains(run.err, "Resolved diffusion attention backend 'TORCH_SDPA'")) << run.err;
  EXPECT_FALSE(contains(run.err, "'SDPA'")) << run.err;
}

TEST_F(FirstContact, DefaultCpuRunLabelsTheBaselineAndReportsNoSelfSpeedup) {
  const fs::path out = dir_ / "run";
  const CliResult run = run_cli({"run", "--platform", "cpu", "--repeats", "1", "--warmup", "0", "--seed", "7",
                                 "--out-dir", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(contains(run.out + run.err, "attention_config.default")) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "TORCH_SDPA (baseline)")) << run.out;
  EXPECT_TRUE(contains(run.out, "activations: generated from seed 7")) << run.out;
  EXPECT_TRUE(contains(run.out, "the baseline's own computation")) << run.out;
  EXPECT_TRUE(contains(run.err, "Baseline for role='self': TORCH_SDPA")) << run.err;
  std::ifstream file(out / "report.json");
  const nlohmann::json report = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  for (const auto& role : report.at("roles")) {
    EXPECT_EQ(role.at("baseline").at("source"), "baseline");
    const auto& configured = role.at("results").at(0);
    EXPECT_TRUE(configured.at("same_as_baseline").get<bool>());
    EXPECT_TRUE(configured.at("speedup_vs_baseline").is_null());
  }
}

TEST_F(FirstContact, FloatingInputsAreConvertedToTheCallDtypeAndBf16OutputIsReadable) {
  const auto q = write_random("q.npy", {1, 5, 2, 8}, npy::ElementType::kFloat32);
  const auto k = write_random("k.npy", {1, 5, 2, 8}, npy::ElementType::kFloat16);
  const auto v = write_random("v.npy", {1, 5, 2, 8}, npy::ElementType::kFloat64);
  const CliResult run = run_cli(attend_args({"--dtype", "bfloat16"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* name : {"q.npy from float32", "k.npy from float16", "v.npy from float64"})
    EXPECT_TRUE(contains(run.err, name)) << name << " missing from: " << run.err;
  EXPECT_TRUE(contains(run.err, "as float32")) << run.err;
  auto out = npy::read_file(path("out.npy"));
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->type, npy::ElementType::kFloat32);

  // Against the float64 oracle on the bfloat16-rounded inputs.
  auto round = [](std::vector<float> x) {
    for (float& f : x) f = cpu::bf16_to_float(cpu::float_to_bf16(f));
    return x;
  };
  std::vector<float> qr = round(q), kr = round(k), vr = round(v);
  AttentionProblem p;
  p.q = TensorView::Contiguous(qr.data(), DType::kFloat32, {1, 5, 2, 8});
  p.k = TensorView::Contiguous(kr.data(), DType::kFloat32, {1, 5, 2, 8});
  p.v = TensorView::Contiguous(vr.data(), DType::kFloat32, {1, 5, 2, 8});
  p.out = TensorView::Contiguous(out->data.data(), DType::kFloat32, {1, 5, 2, 8});
  auto truth = reference_attention(p, OraclePrecision::kFloat64);
  EXPECT_LT(max_errors(p, truth).out, 2e-2);

  const CliResult bits = run_cli(attend_args({"--dtype", "bfloat16", "--bf16-bits"}));
  ASSERT_EQ(bits.exit_code, 0) << bits.err;
  auto raw = npy::read_file(path("out.npy"));
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->type, npy::ElementType::kUInt16);
  EXPECT_EQ(run_cli(attend_args({"--bf16-bits"})).exit_code, 2);
}

TEST_F(FirstContact, ConfigurationFromAFile) {
  write_qkv();
  std::ofstream(path("config.json")) << R"({"per_role": {"cross": {"backend": "TORCH_SDPA"}}})";
  const CliResult run = run_cli({"resolve", "--platform", "cpu", "--role", "cross", "--head-size", "64",
                                 "--diffusion-attention-config", "@" + path("config.json"), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.json()["resolutions"][0]["source"], "per_role") << run.out;

  std::ofstream(path("big.json")) << std::string((1 << 20) + 1, ' ');
  for (const auto& [value, message] : std::vector<std::pair<std::string, std::string>>{
           {"@" + dir_.string(), "not a regular file"},
           {"@" + path("missing.json"), "no such file"},
           {"@" + path("big.json"), "larger than"}}) {
    const CliResult bad = run_cli({"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64",
                                   "--diffusion-attention-config", value});
    EXPECT_EQ(bad.exit_code, 2) << value;
    EXPECT_TRUE(contains(bad.err, message)) << bad.err;
  }
}

TEST_F(FirstContact, VersionAndHelpForOneSubcommand) {
  for (const char* flag : {"--version", "version"}) {
    const CliResult run = run_cli({flag});
    EXPECT_EQ(run.exit_code, 0) << flag;
    EXPECT_TRUE(contains(run.out, "diffattn 0.")) << run.out;
  }
  const CliResult help = run_cli({"help", "attend"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "--role ROLE[:CATEGORY]")) << help.out;
  EXPECT_TRUE(contains(help.out, "--bf16-bits")) << help.out;
}

TEST_F(FirstContact, PlatformKindIsCaseInsensitive) {
  for (const char* kind : {"CPU", "Cpu"}) {
    const CliResult run = run_cli({"backends", "--platform", kind, "--json"});
    EXPECT_EQ(run.exit_code, 0) << kind << ": " << run.err;
    EXPECT_EQ(run.json()["platform"]["kind"], "cpu");
  }
}

TEST_F(FirstContact, ResolveSaysWhenTheBuildHasNoKernel) {
  const std::vector<std::string> args = {"resolve", "--platform", platform_file("b200.json"), "--role", "self",
                                         "--head-size", "128"};
  const CliResult text = run_cli(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  ASSERT_TRUE(contains(text.out, "TRTLLM_ATTN")) << text.out;
  EXPECT_TRUE(contains(text.out, "No kernel in this build")) << text.out;
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const CliResult json = run_cli(json_args);
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_EQ(json.json()["resolutions"][0]["kernel_in_this_build"], false) << json.out;
  const CliResult cpu = run_cli({"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--json"});
  EXPECT_EQ(cpu.json()["resolutions"][0]["kernel_in_this_build"], true) << cpu.out;
}

TEST_F(FirstContact, BarePluginNameIsFoundInTheCurrentFolder) {
  fs::copy_file(DIFFATTN_TEST_PLUGIN_PATH, dir_ / "libmyplugin.so");
  const CliResult run = run_cli({"backends", "--platform", "cpu", "--plugin", "libmyplugin.so", "--json"}, {},
                                dir_.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "TEST_NAIVE_ATTN")) << run.out;
}

}  // namespace
}  // namespace diffattn::testing
