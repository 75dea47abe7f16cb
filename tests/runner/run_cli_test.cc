#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <cstring>
#include <random>

#include "common/npy.h"
#include "runner/safetensors_writer.h"

namespace {

namespace fs = std::filesystem;

struct Output {
  int exit_code = -1;
  std::string text;  // stdout and stderr
};

Output run_cli(const std::string& args) {
  const std::string command = std::string(DIFFATTN_CLI_PATH) + " " + args + " 2>&1";
  Output out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), pipe)) out.text += buf.data();
  const int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("diffattn_run_" + name + "_" +
                                                  std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(d);
  return d;
}

TEST(RunCli, TinyDefaultRunsEndToEndOnCpu) {
  const fs::path out = fresh_dir("tiny");
  const auto start = std::chrono::steady_clock::now();
  const Output r = run_cli("run --platform cpu --out-dir " + out.string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.text;
  EXPECT_LT(seconds, 60.0);
  EXPECT_NE(r.text.find("tiny-dit"), std::string::npos);
  EXPECT_NE(r.text.find("Resolved diffusion attention backend"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("relL2"), std::string::npos);
  const auto doc = nlohmann::json::parse(read(out / "report.json"));
  EXPECT_EQ(doc.at("roles").size(), 2u);
  EXPECT_GT(doc.at("roles").at(0).at("baseline").at("time_ms").at("median").get<double>(), 0.0);
  const std::string html = read(out / "report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  fs::remove_all(out);
}

TEST(RunCli, CompareWithJsonOutput) {
  const fs::path out = fresh_dir("compare");
  const Output r = run_cli("run --platform cpu --model tiny-dit --height 64 --width 64 --num-frames 5 --layers 1 "
                           "--repeats 1 --warmup 0 --compare TORCH_SDPA,auto --json --out-dir " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.text;
  const auto json_start = r.text.find("{\n");
  ASSERT_NE(json_start, std::string::npos) << r.text;
  EXPECT_TRUE(fs::exists(out / "report.json"));
  const auto doc = nlohmann::json::parse(read(out / "report.json"));
  EXPECT_EQ(doc.at("configurations").size(), 2u);
  EXPECT_TRUE(doc.at("roles").at(1).at("verdict").at("configuration").is_string());
  fs::remove_all(out);
}

// Writes a float32 [1, tokens, heads, 64] array of fresh normal values.
void write_dump(const fs::path& path, std::int64_t tokens, std::int64_t heads) {
  diffattn::npy::Array a;
  a.type = diffattn::npy::ElementType::kFloat32;
  a.shape = {1, tokens, heads, 64};
  std::vector<float> values(static_cast<std::size_t>(a.numel()));
  std::mt19937 rng{std::random_device{}()};
  std::normal_distribution<float> normal;
  for (float& v : values) v = normal(rng);
  a.data.resize(values.size() * 4);
  std::memcpy(a.data.data(), values.data(), a.data.size());
  fs::create_directories(path.parent_path());
  ASSERT_TRUE(diffattn::npy::write_file(path.string(), a).ok());
}

TEST(RunCli, RealDumpsReplaceGeneratedInputsForTheirRole) {
  const fs::path dumps = fresh_dir("dumps");
  const fs::path out = fresh_dir("dumps_out");
  write_dump(dumps / "self" / "q.npy", 50, 4);
  write_dump(dumps / "self" / "k.npy", 50, 4);
  write_dump(dumps / "self" / "v.npy", 50, 4);
  const Output r = run_cli("run --platform cpu --activations " + dumps.string() +
                           " --repeats 1 --warmup 0 --out-dir " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.text;
  const auto doc = nlohmann::json::parse(read(out / "report.json"));
  const auto& self = doc.at("roles").at(0);
  EXPECT_EQ(self.at("activations"), dumps.string());
  EXPECT_EQ(self.at("seqlen_q"), 50);
  EXPECT_EQ(doc.at("roles").at(1).at("activations"), "generated");
  write_dump(dumps / "cross" / "q.npy", 50, 3);  // tiny-dit has 4 heads: refused, naming the role
  write_dump(dumps / "cross" / "k.npy", 8, 3);
  write_dump(dumps / "cross" / "v.npy", 8, 3);
  const Output bad = run_cli("run --platform cpu --activations " + dumps.string() + " --out-dir " + out.string());
  EXPECT_EQ(bad.exit_code, 2) << bad.text;
  EXPECT_NE(bad.text.find("cross"), std::string::npos) << bad.text;
  fs::remove_all(dumps);
  fs::remove_all(out);
}

TEST(RunCli, SafetensorsDumpsReplaceGeneratedInputsForTheirRole) {
  namespace tf = diffattn::test_files;
  const fs::path dumps = fresh_dir("st_dumps");
  const fs::path out = fresh_dir("st_dumps_out");
  std::mt19937 rng{std::random_device{}()};
  for (const char* sample : {"step_00", "step_40"}) {
    tf::write_bytes(dumps / "self" / sample / "qkv.safetensors",
                    tf::safetensors_image({tf::random_tensor("q", diffattn::DType::kBFloat16, {1, 40, 4, 64}, rng),
                                           tf::random_tensor("k", diffattn::DType::kBFloat16, {1, 40, 4, 64}, rng),
                                           tf::random_tensor("v", diffattn::DType::kBFloat16, {1, 40, 4, 64}, rng)}));
  }
  const Output r = run_cli("run --platform cpu --model tiny-dit --activations " + dumps.string() +
                           " --repeats 1 --warmup 0 --out-dir " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.text;
  const auto doc = nlohmann::json::parse(read(out / "report.json"));
  const auto& self = doc.at("roles").at(0);
  EXPECT_EQ(self.at("activations"), dumps.string());
  EXPECT_EQ(self.at("seqlen_q"), 40);
  EXPECT_EQ(doc.at("roles").at(1).at("activations"), "generated");
  EXPECT_NE(r.text.find("step_40"), std::string::npos) << r.text;
  // A dump without v is refused before anything runs, naming the file and what it lacks.
  tf::write_bytes(dumps / "cross" / "qkv.safetensors",
                  tf::safetensors_image({tf::random_tensor("q", diffattn::DType::kFloat32, {1, 40, 4, 64}, rng),
                                         tf::random_tensor("k", diffattn::DType::kFloat32, {1, 8, 4, 64}, rng)}));
  const Output bad = run_cli("run --platform cpu --model tiny-dit --activations " + dumps.string() + " --out-dir " + out.string());
  EXPECT_EQ(bad.exit_code, 2) << bad.text;
  EXPECT_NE(bad.text.find("qkv.safetensors has no tensor named \"v\""), std::string::npos) << bad.text;
  fs::remove_all(dumps);
  fs::remove_all(out);
}

TEST(RunCli, PromptTokensMaskTheTextKeysAndAreReported) {
  const fs::path out = fresh_dir("prompt");
  const Output r = run_cli("run --platform cpu --model tiny-dit --prompt-tokens 20 --compare TORCH_SDPA --repeats 1 "
                           "--warmup 0 --out-dir " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.text;
  EXPECT_NE(r.text.find("prompt: 20 of 64 text tokens; padded text keys masked"), std::string::npos) << r.text;
  const auto doc = nlohmann::json::parse(read(out / "report.json"));
  const auto& workload = doc.at("workload");
  EXPECT_EQ(workload.at("prompt_tokens"), 20);
  EXPECT_EQ(workload.at("text_keys_masked"), true);
  EXPECT_FALSE(doc.at("roles").at(0).at("text_keys_masked").get<bool>());  // self: no text keys
  const auto& cross = doc.at("roles").at(1);
  EXPECT_TRUE(cross.at("text_keys_masked").get<bool>());
  // The configuration and the baseline get the same mask on the same inputs.
  EXPECT_EQ(cross.at("results").at(0).at("status"), "ok");
  EXPECT_EQ(cross.at("results").at(0).at("quality").at("rel_l2").get<double>(), 0.0);
  EXPECT_NE(read(out / "report.html").find("prompt: 20 of 64 text tokens"), std::string::npos);
  fs::remove_all(out);

  const Output plain = run_cli("run --platform cpu --model tiny-dit --repeats 1 --warmup 0 --json --out-dir " + out.string());
  ASSERT_EQ(plain.exit_code, 0) << plain.text;
  const auto unmasked = nlohmann::json::parse(read(out / "report.json"));
  EXPECT_TRUE(unmasked.at("workload").at("prompt_tokens").is_null());
  EXPECT_EQ(unmasked.at("workload").at("text_keys_masked"), false);
  fs::remove_all(out);
}

TEST(RunCli, PromptTokensOutOfRangeAreRefusedNamingTheRange) {
  for (const char* n : {"0", "65"}) {
    const Output r = run_cli(std::string("run --platform cpu --model tiny-dit --prompt-tokens ") + n);
    EXPECT_EQ(r.exit_code, 2) << r.text;
    EXPECT_NE(r.text.find("--prompt-tokens " + std::string(n) + " is out of range for tiny-dit: give 1 to 64"),
              std::string::npos) << r.text;
  }
}

TEST(RunCli, UnknownModelListsTheZoo) {
  const Output r = run_cli("run --platform cpu --model wan9");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.text.find("wan2.2-ti2v-5b"), std::string::npos) << r.text;
}

TEST(RunCli, BigModelOnCpuIsRefusedWithAdvice) {
  const Output r = run_cli("run --platform cpu --model wan2.1-14b");
  EXPECT_EQ(r.exit_code, 3) << r.text;
  EXPECT_NE(r.text.find("--cpu-budget-tflop"), std::string::npos) << r.text;
}

TEST(RunCli, ExplicitBackendThatCannotRunExitsThree) {
  const Output r = run_cli("run --platform cpu --diffusion-attention-backend CUDNN_ATTN");
  EXPECT_EQ(r.exit_code, 3) << r.text;
}

TEST(RunCli, UnknownFlagIsAUsageError) {
  const Output r = run_cli("run --platform cpu --frames 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.text.find("--frames"), std::string::npos) << r.text;
}

}  // namespace
