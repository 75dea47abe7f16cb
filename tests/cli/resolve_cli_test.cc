// `diffattn resolve` run as a separate process: the acceptance scenarios of the selection contract,
// the JSON shape, both flag forms, the environment rule and --model.

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_runner.h"
#include "models/model_zoo.h"

namespace diffattn::testing {
namespace {

const std::vector<std::string> kHopperThreeRoles = {
    "resolve", "--platform", platform_file("h200.json"), "--role", "self", "--role", "cross:cross",
    "--role", "ltx2.audio_to_video:cross", "--head-size", "128"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

void expect_resolution(const nlohmann::json& r, const std::string& role, const std::string& backend,
                       const std::string& source) {
  EXPECT_EQ(r.at("role"), role);
  EXPECT_EQ(r.at("backend"), backend) << r.dump();
  EXPECT_EQ(r.at("source"), source) << r.dump();
}

TEST(ResolveCli, HopperAcceptanceScenario) {
  const CliResult run = run_cli(with(kHopperThreeRoles, {"--diffusion-attention-backend", "FLASH_ATTN",
                                                         "--diffusion-attention-config.per_role.cross.backend",
                                                         "TORCH_SDPA", "--json"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = run.json();
  ASSERT_TRUE(doc.is_object()) << run.out;

  std::set<std::string> keys;
  for (const auto& [k, v] : doc.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"platform", "resolutions"}));
  EXPECT_EQ(doc.at("platform").at("kind"), "cuda");

  const auto& res = doc.at("resolutions");
  ASSERT_EQ(res.size(), 3u);
  expect_resolution(res[0], "self", "FLASH_ATTN", "default");
  expect_resolution(res[1], "cross", "TORCH_SDPA", "per_role");
  expect_resolution(res[2], "ltx2.audio_to_video", "TORCH_SDPA", "category");
  EXPECT_EQ(res[2].at("category"), "cross");
  EXPECT_EQ(res[0].at("head_size"), 128);
  EXPECT_EQ(res[1].at("spec").at("backend"), "TORCH_SDPA");
  for (const auto& r : res) {
    for (const char* key : {"role", "category", "head_size", "backend", "source", "spec", "considered"}) {
      EXPECT_TRUE(r.contains(key)) << "missing '" << key << "' in " << r.dump();
    }
  }
}

TEST(ResolveCli, ExplicitTrtllmOnHopperExitsThreeNamingBlackwell) {
  const CliResult run = run_cli(with(kHopperThreeRoles, {"--diffusion-attention-backend", "TRTLLM_ATTN",
                                                         "--diffusion-attention-config.per_role.cross.backend",
                                                         "TORCH_SDPA", "--json"}));
  EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
  const nlohmann::json doc = run.json();
  ASSERT_TRUE(doc.contains("error")) << run.out;
  EXPECT_EQ(doc["error"]["code"], "unsupported");
  const std::string message = doc["error"]["message"];
  EXPECT_NE(message.find("Blackwell"), std::string::npos) << message;
  EXPECT_NE(message.find("SM100"), std::string::npos) << message;
  EXPECT_NE(message.find("SM103"), std::string::npos) << message;
  EXPECT_NE(run.err.find("SM100"), std::string::npos) << "a readable line on stderr too: " << run.err;
}

TEST(ResolveCli, EqualsFormMatchesSpaceForm) {
  const CliResult spaced = run_cli(with(kHopperThreeRoles, {"--diffusion-attention-backend", "FLASH_ATTN",
                                                            "--diffusion-attention-config.per_role.cross.backend",
                                                            "TORCH_SDPA", "--json"}));
  const CliResult equals = run_cli({"resolve", "--platform=" + platform_file("h200.json"), "--role=self",
                                    "--role=cross:cross", "--role=ltx2.audio_to_video:cross", "--head-size=128",
                                    "--diffusion-attention-backend=FLASH_ATTN",
                                    "--diffusion-attention-config.per_role.cross.backend=TORCH_SDPA", "--json"});
  ASSERT_EQ(equals.exit_code, 0) << equals.err;
  EXPECT_EQ(equals.json(), spaced.json());
}

TEST(ResolveCli, JsonConfigEqualsDottedFlags) {
  const CliResult dotted = run_cli(with(kHopperThreeRoles, {"--diffusion-attention-config.default.backend",
                                                            "TORCH_SDPA",
                                                            "--diffusion-attention-config.per_role.self.backend",
                                                            "FLASH_ATTN", "--json"}));
  const CliResult json = run_cli(with(
      kHopperThreeRoles,
      {"--diffusion-attention-config",
       R"({"default": {"backend": "TORCH_SDPA"}, "per_role": {"self": {"backend": "FLASH_ATTN"}}})", "--json"}));
  ASSERT_EQ(dotted.exit_code, 0) << dotted.err;
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(dotted.json(), json.json());
  expect_resolution(json.json()["resolutions"][0], "self", "FLASH_ATTN", "per_role");
  expect_resolution(json.json()["resolutions"][1], "cross", "TORCH_SDPA", "default");
}

TEST(ResolveCli, EnvironmentBackendAppliesWhenNothingElseSetsADefault) {
  const CliResult run = run_cli(with(kHopperThreeRoles, {"--json"}), {{"DIFFUSION_ATTENTION_BACKEND", "TORCH_SDPA"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = run.json();
  ASSERT_EQ(doc["resolutions"].size(), 3u) << run.out;
  for (const auto& r : doc["resolutions"]) EXPECT_EQ(r["source"], "env") << r.dump();
  EXPECT_EQ(doc["resolutions"][0]["backend"], "TORCH_SDPA");
}

TEST(ResolveCli, CommandLineWinsOverEnvironment) {
  const std::map<std::string, std::optional<std::string>> env = {{"DIFFUSION_ATTENTION_BACKEND", "TORCH_SDPA"}};
  const CliResult shorthand =
      run_cli(with(kHopperThreeRoles, {"--diffusion-attention-backend", "FLASH_ATTN", "--json"}), env);
  ASSERT_EQ(shorthand.exit_code, 0) << shorthand.err;
  expect_resolution(shorthand.json()["resolutions"][0], "self", "FLASH_ATTN", "default");

  // An explicit "auto" on the command line means "platform default", whatever the environment says.
  const CliResult automatic =
      run_cli(with(kHopperThreeRoles, {"--diffusion-attention-backend", "auto", "--json"}), env);
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  expect_resolution(automatic.json()["resolutions"][0], "self", "FLASH_ATTN", "platform");
  EXPECT_TRUE(automatic.json()["resolutions"][0]["spec"].is_null());
}

TEST(ResolveCli, ShorthandWithExplicitDefaultIsAConfigError) {
  const CliResult run = run_cli(with(kHopperThreeRoles, {"--diffusion-attention-backend", "FLASH_ATTN",
                                                         "--diffusion-attention-config.default.backend",
                                                         "TORCH_SDPA", "--json"}));
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_EQ(run.json()["error"]["code"], "invalid_config");
}

TEST(ResolveCli, TypedOptionFlagsAreValidatedBeforeThePlatformIsAsked) {
  const std::vector<std::string> base = {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--json"};
  // A valid block_sparse block resolves (FP8 precision too: SAGE_ATTN's arithmetic over the lists);
  // an out-of-range value does not (exit 2).
  const CliResult valid = run_cli(with(base, {"--diffusion-attention-config.default.backend", "RAINFUSION_ATTN",
                                              "--diffusion-attention-config.default.block_sparse.sparsity", "0.7"}));
  EXPECT_EQ(valid.exit_code, 0) << valid.out;
  const CliResult fp8 = run_cli(with(base, {"--diffusion-attention-config.default.backend", "RAINFUSION_ATTN",
                                            "--diffusion-attention-config.default.block_sparse.precision", "fp8"}));
  EXPECT_EQ(fp8.exit_code, 0) << fp8.out;
  const CliResult out_of_range = run_cli(with(base, {"--diffusion-attention-config.default.backend=RAINFUSION_ATTN",
                                                     "--diffusion-attention-config.default.block_sparse.sparsity=1.5"}));
  EXPECT_EQ(out_of_range.exit_code, 2) << out_of_range.out;
  EXPECT_NE(out_of_range.json()["error"]["message"].get<std::string>().find("sparsity"), std::string::npos)
      << out_of_range.out;
  // A block on a backend that does not own it names the block.
  const CliResult misplaced = run_cli(with(base, {"--diffusion-attention-config.default.backend", "TORCH_SDPA",
                                                  "--diffusion-attention-config.default.quant.dtype_qk", "int8"}));
  EXPECT_EQ(misplaced.exit_code, 2) << misplaced.out;
  EXPECT_NE(misplaced.json()["error"]["message"].get<std::string>().find("quant"), std::string::npos);
}

TEST(ResolveCli, FastvideoTopkFlagNeedsTheFastvideoBackend) {
  const std::vector<std::string> base = {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--json"};
  const CliResult alone = run_cli(with(base, {"--fastvideo-vsa-topk", "8"}));
  EXPECT_EQ(alone.exit_code, 2) << alone.out;
  EXPECT_NE(alone.json()["error"]["message"].get<std::string>().find("FASTVIDEO_VSA"), std::string::npos);
  EXPECT_EQ(run_cli(with(base, {"--fastvideo-vsa-topk=abc"})).exit_code, 2);
  EXPECT_EQ(run_cli(with(base, {"--fastvideo-vsa-topk", "0"})).exit_code, 2);
  // With the backend it is a valid configuration: it runs on the CPU, on Hopper and on Ampere (the
  // mma.sync walk), and a Turing GPU lacks its kernels.
  const std::vector<std::string> paired_flags = {"--diffusion-attention-backend", "FASTVIDEO_VSA", "--fastvideo-vsa-topk", "8"};
  const CliResult paired = run_cli(with(base, paired_flags));
  EXPECT_EQ(paired.exit_code, 0) << paired.out;
  EXPECT_EQ(paired.json()["resolutions"][0]["backend"], "FASTVIDEO_VSA") << paired.out;
  auto on = [&](const std::string& platform) {
    return run_cli(with({"resolve", "--platform", platform_file(platform), "--role", "self", "--head-size", "64", "--json"},
                        paired_flags));
  };
  const CliResult on_hopper = on("h200.json");
  EXPECT_EQ(on_hopper.exit_code, 0) << on_hopper.out;
  EXPECT_EQ(on_hopper.json()["resolutions"][0]["backend"], "FASTVIDEO_VSA") << on_hopper.out;
  const CliResult on_ampere = on("a100.json");
  EXPECT_EQ(on_ampere.exit_code, 0) << on_ampere.out;
  EXPECT_EQ(on_ampere.json()["resolutions"][0]["backend"], "FASTVIDEO_VSA") << on_ampere.out;
  const CliResult on_turing = on("t4.json");
  EXPECT_EQ(on_turing.exit_code, 3) << on_turing.out;
}

TEST(ResolveCli, BadJsonConfigExitsTwoWithJsonError) {
  const CliResult run = run_cli(with(kHopperThreeRoles, {"--diffusion-attention-config", "{\"default\": ", "--json"}));
  EXPECT_EQ(run.exit_code, 2);
  const nlohmann::json doc = run.json();
  ASSERT_TRUE(doc.is_object()) << run.out;
  EXPECT_EQ(doc["error"]["code"], "invalid_config");
  EXPECT_FALSE(doc["error"]["message"].get<std::string>().empty());
  EXPECT_FALSE(run.err.empty());
}

TEST(ResolveCli, UnknownBackendExitsTwoListingValidNames) {
  const CliResult run = run_cli(with(kHopperThreeRoles, {"--diffusion-attention-backend", "NOPE_ATTN", "--json"}));
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_EQ(run.json()["error"]["code"], "unknown_backend");
  const std::string message = run.json()["error"]["message"];
  EXPECT_NE(message.find("NOPE_ATTN"), std::string::npos) << message;
  EXPECT_NE(message.find("TORCH_SDPA"), std::string::npos) << message;
  EXPECT_NE(message.find("FLASH_ATTN"), std::string::npos) << message;
}

TEST(ResolveCli, MissingPlatformFileIsAnError) {
  const CliResult run = run_cli({"resolve", "--platform", platform_file("no_such_platform.json"), "--role", "self",
                                 "--head-size", "128", "--json"});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_TRUE(run.json().contains("error")) << run.out;
  EXPECT_NE(run.json()["error"]["message"].get<std::string>().find("no_such_platform.json"), std::string::npos);
}

TEST(ResolveCli, MalformedPlatformFileIsAnError) {
  const std::string path = ::testing::TempDir() + "/diffattn_bad_platform_resolve_cli.json";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"kind\": \"cuda\", \"compute_capability\": ", f);
  std::fclose(f);
  const CliResult run = run_cli({"resolve", "--platform", path, "--role", "self", "--head-size", "128", "--json"});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_TRUE(run.json().contains("error")) << run.out;
}

TEST(ResolveCli, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {"resolve", "--platform", "cpu", "--role", "self"},                               // no head size
      {"resolve", "--platform", "cpu", "--head-size", "64"},                            // no role
      {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "abc"},         // not a number
      {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "0"},           // out of range
      {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--bogus"},  // unknown flag
      {"resolve", "--platform", "cpu", "--role", ":cross", "--head-size", "64"},        // empty role
      {"resolve", "--platform", "cpu", "--role", "self", "--head-size"},                // missing value
      {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--json=yes"},
      {"resolve", "--platform", "cpu", "--platform", "cpu", "--role", "self", "--head-size", "64"},
  };
  for (const auto& args : cases) {
    const CliResult run = run_cli(with(args, {"--json"}));
    EXPECT_EQ(run.exit_code, 2) << ::testing::PrintToString(args) << "\n" << run.err;
    EXPECT_TRUE(run.json().contains("error")) << ::testing::PrintToString(args) << "\n" << run.out;
  }
}

TEST(ResolveCli, CpuPlatformDefaultsToTorchSdpaAndRejectsCudaOnlyBackends) {
  const CliResult defaults = run_cli({"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--json"});
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err;
  expect_resolution(defaults.json()["resolutions"][0], "self", "TORCH_SDPA", "platform");

  const CliResult flash = run_cli({"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64",
                                   "--diffusion-attention-backend", "FLASH_ATTN", "--json"});
  EXPECT_EQ(flash.exit_code, 3) << flash.out;
  EXPECT_NE(flash.json()["error"]["message"].get<std::string>().find("FLASH_ATTN"), std::string::npos);
}

TEST(ResolveCli, ModelDeclaresRolesAndHeadSizes) {
  auto model = find_model("wan2.1-14b");
  ASSERT_TRUE(model.ok()) << model.status().message();
  const CliResult run = run_cli({"resolve", "--platform", platform_file("h200.json"), "--model", "wan2.1-14b", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = run.json();
  const auto& res = doc["resolutions"];
  ASSERT_EQ(res.size(), (*model)->roles.size());
  for (std::size_t i = 0; i < res.size(); ++i) {
    EXPECT_EQ(res[i]["role"], (*model)->roles[i].role);
    EXPECT_EQ(res[i]["head_size"], (*model)->roles[i].head_size);
    EXPECT_EQ(res[i]["backend"], "FLASH_ATTN");
    EXPECT_EQ(res[i]["source"], "platform");
  }

  const CliResult one = run_cli({"resolve", "--platform", platform_file("h200.json"), "--model", "wan2.1-14b",
                                 "--role", (*model)->roles.back().role, "--head-size", "64", "--json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const nlohmann::json one_doc = one.json();
  ASSERT_EQ(one_doc["resolutions"].size(), 1u);
  EXPECT_EQ(one_doc["resolutions"][0]["head_size"], 64);

  const CliResult unknown_role = run_cli({"resolve", "--platform", "cpu", "--model", "wan2.1-14b", "--role",
                                          "no_such_role", "--json"});
  EXPECT_EQ(unknown_role.exit_code, 2);
  const CliResult unknown_model = run_cli({"resolve", "--platform", "cpu", "--model", "no-such-model", "--json"});
  EXPECT_NE(unknown_model.exit_code, 0);
  EXPECT_TRUE(unknown_model.json().contains("error")) << unknown_model.out;
}

TEST(ResolveCli, HumanOutputIsOneTableWithEveryRole) {
  const CliResult run = run_cli(with(kHopperThreeRoles, {"--diffusion-attention-config.per_role.cross.backend",
                                                         "TORCH_SDPA"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* needle : {"role", "category", "head size", "backend", "source", "spec", "passed over",
                             "ltx2.audio_to_video", "TORCH_SDPA", "FLASH_ATTN", "category", "per_role"}) {
    EXPECT_NE(run.out.find(needle), std::string::npos) << needle << " missing in\n" << run.out;
  }
  // The log names why each role got its backend (stderr keeps stdout clean).
  EXPECT_NE(run.err.find("Resolved diffusion attention backend"), std::string::npos) << run.err;
}

// A backend's kernels are per device: FLASHINFER_ATTN's CPU kernel runs a CPU plan, while a plan
// for TRTLLM_ATTN on a described B200 says this build has no CUDA kernel for it.
TEST(ResolveCli, KernelsInThisBuildArePerDevice) {
  const auto base = [](const char* backend) {
    return std::vector<std::string>{"resolve", "--role", "self", "--head-size", "128",
                                    "--diffusion-attention-backend", backend, "--json"};
  };
  const CliResult cpu = run_cli(with(base("FLASHINFER_ATTN"), {"--platform", "cpu"}));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(cpu.json().at("resolutions")[0].at("kernel_in_this_build"), true) << cpu.out;
  const CliResult b200 = run_cli(with(base("TRTLLM_ATTN"), {"--platform", platform_file("b200.json")}));
  ASSERT_EQ(b200.exit_code, 0) << b200.err;
  const nlohmann::json r = b200.json().at("resolutions")[0];
  EXPECT_EQ(r.at("kernel_in_this_build"), false) << b200.out;
  EXPECT_EQ(r.at("no_kernel_reason"), "TRTLLM_ATTN is registered for planning, but this build of diffattn has no "
                                      "kernel for it");
}

}  // namespace
}  // namespace diffattn::testing
