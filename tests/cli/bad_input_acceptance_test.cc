// Bad inputs the tool used to accept silently (or answer with a misleading message), run as a
// separate process: each row checks the exit code, a fragment of the message, text that must not
// appear, and that the files the command would write (or was given) are untouched.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_runner.h"
#include "common/npy.h"

namespace diffattn::testing {
namespace {

namespace fs = std::filesystem;

struct BadInput {
  std::string name;
  std::vector<std::string> args;
  int exit_code;
  std::string says;                 // in stderr (or stdout for a listing)
  std::string never_says;           // must not appear in stderr or stdout; empty: no check
  std::vector<std::string> absent;  // paths that must not exist afterwards
  std::map<std::string, std::optional<std::string>> env;
};

class BadInputAcceptance : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diffattn_bad_input_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A float32 array of fresh values uniform in (-magnitude, magnitude), so every one is finite.
  void write_f32(const std::string& name, std::vector<std::int64_t> shape, float magnitude = 1.0f) {
    npy::Array a;
    a.type = npy::ElementType::kFloat32;
    a.shape = std::move(shape);
    std::vector<float> values(static_cast<std::size_t>(a.numel()));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float& v : values) v = uniform(rng_) * magnitude;
    a.data.resize(values.size() * sizeof(float));
    if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());  // empty arrays have no storage
    fs::create_directories(fs::path(path(name)).parent_path());
    ASSERT_TRUE(npy::write_file(path(name), a).ok());
  }

  // A float64 array of fresh normal values with one element set to `special`.
  void write_f64_with(const std::string& name, std::vector<std::int64_t> shape, double special) {
    npy::Array a;
    a.type = npy::ElementType::kFloat64;
    a.shape = std::move(shape);
    std::vector<double> values(static_cast<std::size_t>(a.numel()));
    std::normal_distribution<double> normal;
    for (double& v : values) v = normal(rng_);
    values[rng_() % values.size()] = special;
    a.data.resize(values.size() * sizeof(double));
    std::memcpy(a.data.data(), values.data(), a.data.size());
    ASSERT_TRUE(npy::write_file(path(name), a).ok());
  }

  // A .npy header whose shape is `shape_text`, followed by no data.
  void write_npy_header(const std::string& name, const std::string& shape_text) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream f(path(name), std::ios::binary);
    f << std::string("\x93NUMPY\x01\x00", 8) << static_cast<char>(header.size() & 0xff)
      << static_cast<char>(header.size() >> 8) << header;
  }

  std::string write_text(const std::string& name, const std::string& text) {
    std::ofstream(path(name)) << text;
    return path(name);
  }

  std::vector<std::string> attend_args(const std::string& q, const std::string& k, const std::string& v) const {
    return {"attend", "--platform", "cpu", "--q", path(q), "--k", path(k), "--v", path(v), "--out", path("out.npy")};
  }

  std::vector<std::string> run_args(std::vector<std::string> more) const {
    std::vector<std::string> args = {"run", "--platform", "cpu", "--model", "tiny-dit", "--height", "64", "--width", "64",
                                     "--num-frames", "5", "--out-dir", path("report")};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  void check(const BadInput& c) {
    SCOPED_TRACE(c.name);
    const CliResult r = run_cli(c.args, c.env);
    EXPECT_EQ(r.exit_code, c.exit_code) << "stderr: " << r.err << "\nstdout: " << r.out.substr(0, 2000);
    EXPECT_NE((r.err + r.out).find(c.says), std::string::npos) << "stderr: " << r.err << "\nstdout: " << r.out.substr(0, 2000);
    if (!c.never_says.empty())
      EXPECT_EQ((r.err + r.out).find(c.never_says), std::string::npos) << "stderr: " << r.err << "\nstdout: " << r.out;
    EXPECT_LT(r.err.size(), 4000u) << "an echoed input must be bounded";
    for (const std::string& p : c.absent) EXPECT_FALSE(fs::exists(p)) << p << " was written";
  }

  fs::path dir_;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(BadInputAcceptance, RunRefusesBadCompareListsAndActivationFolders) {
  fs::create_directories(path("empty_dumps"));
  for (const char* op : {"q", "k"}) write_f32(std::string("partial/self/") + op + ".npy", {1, 32, 4, 64});
  const std::vector<std::string> report = {path("report")};
  const std::vector<BadInput> cases = {
      {"unknown compare name", run_args({"--compare", "FOO,TORCH_SDPA"}), 2,
       "Unknown diffusion attention backend: 'FOO'", "", report},
      {"compare typo gets a suggestion, echoed as written", run_args({"--compare", "torch_sdpx"}), 2,
       "'torch_sdpx'. Did you mean 'TORCH_SDPA'?", "'TORCH_SDPX'", report},
      {"empty compare", run_args({"--compare", ""}), 2, "has an empty entry", "", report},
      {"compare of a lone comma", run_args({"--compare", ","}), 2, "has an empty entry", "", report},
      {"compare with an empty entry inside", run_args({"--compare", "TORCH_SDPA,,auto"}), 2, "has an empty entry", "",
       report},
      {"empty activations folder", run_args({"--activations", path("empty_dumps")}), 2, "holds no dump for any role of tiny-dit",
       "", report},
      {"activations folder missing v", run_args({"--activations", path("partial")}), 2,
       "holds q.npy and k.npy but no v.npy", "", report},
      {"layers past the model", run_args({"--layers", "99"}), 2, "model 'tiny-dit' has 2 layers per role", "", report},
      {"layer index past the model", run_args({"--layers", "0,5"}), 2, "names layer 5", "", report},
  };
  for (const BadInput& c : cases) check(c);
}

TEST_F(BadInputAcceptance, AttendRefusesInputsItCannotComputeHonestly) {
  write_f32("q.npy", {1, 8, 2, 16});
  write_f32("k.npy", {1, 8, 2, 16});
  write_f32("v.npy", {1, 8, 2, 16});
  write_f32("q_huge.npy", {1, 8, 2, 16}, 3e38f);
  write_f32("k_huge.npy", {1, 8, 2, 16}, 3e38f);
  write_f32("q_heads0.npy", {1, 8, 0, 16});
  write_f32("k_heads0.npy", {1, 8, 0, 16});
  write_f32("v_heads0.npy", {1, 8, 0, 16});
  write_f64_with("q_1e300.npy", {1, 8, 2, 16}, 1e300);
  write_npy_header("q_negative.npy", "(1, -8, 2, 16)");
  const std::vector<std::string> out = {path("out.npy")};
  const std::vector<BadInput> cases = {
      {"finite inputs whose scores overflow float32", attend_args("q_huge.npy", "k_huge.npy", "v.npy"), 2,
       "too large for float32 attention scores", "", out},
      {"float64 value outside float32", attend_args("q_1e300.npy", "k.npy", "v.npy"), 2,
       "is finite but outside float32's range", "holds Inf", out},
      {"negative dimension", attend_args("q_negative.npy", "k.npy", "v.npy"), 2, "a negative size (-8)", "non-integer",
       out},
      {"zero heads", attend_args("q_heads0.npy", "k_heads0.npy", "v_heads0.npy"), 2, "head counts must be >= 1", "GQA",
       out},
  };
  for (const BadInput& c : cases) check(c);
}

TEST_F(BadInputAcceptance, EnvironmentValuesThatMeanNothingAreNamed) {
  write_f32("q.npy", {1, 8, 2, 16});
  write_f32("k.npy", {1, 8, 2, 16});
  write_f32("v.npy", {1, 8, 2, 16});
  const std::vector<BadInput> cases = {
      {"unknown log level", {"backends", "--platform", "cpu"}, 0,
       "DIFFATTN_LOG_LEVEL='verbose' is not a log level; valid values are debug, info, warning and error", "", {},
       {{"DIFFATTN_LOG_LEVEL", "verbose"}}},
      {"unknown CPU kernel", attend_args("q.npy", "k.npy", "v.npy"), 0,
       "'avx9' is not a CPU kernel; valid values are portable, avx2 and avx512", "", {},
       {{"DIFFATTN_CPU_ISA", "avx9"}}},
  };
  for (const BadInput& c : cases) check(c);
  EXPECT_TRUE(fs::exists(path("out.npy"))) << "an unknown DIFFATTN_CPU_ISA keeps the run-time choice and runs";
}

TEST_F(BadInputAcceptance, ImpossiblePlatformsAndRepeatedKeysAreRefused) {
  auto platform = [&](const std::string& name, const std::string& text) {
    return std::vector<std::string>{"resolve", "--platform", write_text(name, text), "--role", "self", "--head-size", "128"};
  };
  const std::vector<BadInput> cases = {
      {"compute capability 99.9", platform("cc99.json", R"({"kind": "cuda", "compute_capability": "99.9"})"), 2,
       "MAJOR 1 to 15"},
      {"compute capability 0.1", platform("cc0.json", R"({"kind": "cuda", "compute_capability": "0.1"})"), 2,
       "MAJOR 1 to 15"},
      {"negative compute capability", platform("ccneg.json", R"({"kind": "cuda", "compute_capability": "-9.0"})"), 2,
       "'compute_capability' must be"},
      {"non-numeric compute capability", platform("ccx.json", R"({"kind": "cuda", "compute_capability": "nine"})"), 2,
       "'compute_capability' must be"},
      {"missing plugin path",
       platform("plugin.json", R"({"kind": "cuda", "compute_capability": "9.0", "features": {"plugins": ["/no/such/p.so"]}})"),
       2, "(no such file)"},
      {"repeated platform key", platform("dup.json", R"({"kind": "cpu", "kind": "cuda", "compute_capability": "9.0"})"),
       2, "has the key 'kind' twice"},
      {"null where a value is expected", platform("null.json", R"({"kind": null})"), 2, "got null.", "null null"},
      {"repeated configuration key",
       {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64", "--diffusion-attention-config",
        R"({"default": {"backend": "TORCH_SDPA", "backend": "FLASH_ATTN"}})"},
       2, "has the key 'default.backend' twice"},
      {"repeated key inside a dotted flag value",
       {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64",
        "--diffusion-attention-config.per_role", R"({"self": "TORCH_SDPA", "self": "FLASH_ATTN"})"},
       2, "has the key 'self' twice"},
  };
  for (const BadInput& c : cases) check(c);
}

TEST_F(BadInputAcceptance, BackendNamesAreEchoedAsWrittenAndBounded) {
  const std::string long_name(100000, 'x');
  auto resolve = [](const std::string& backend) {
    return std::vector<std::string>{"resolve", "--platform", "cpu", "--role", "self", "--head-size", "64",
                                    "--diffusion-attention-backend", backend};
  };
  const std::vector<BadInput> cases = {
      {"lower-case unknown name", resolve("my_attn"), 2, "Unknown diffusion attention backend: 'my_attn'", "'MY_ATTN'"},
      {"typo", resolve("flash_atn"), 2, "Did you mean 'FLASH_ATTN'?"},
      {"100,000-character name", resolve(long_name), 2, "'" + std::string(64, 'x') + "...'"},
  };
  for (const BadInput& c : cases) check(c);
}

TEST_F(BadInputAcceptance, ListingOnTheCpuNeitherNarratesASelectionNorSuggestsGpuBackends) {
  for (const char* never : {"explicitly selected", "Select FLASH_ATTN", "select FLASH_ATTN", "Select CUDNN_ATTN",
                            "Select FLASHINFER_ATTN"})
    check({std::string("backends listing without '") + never + "'", {"backends", "--platform", "cpu"}, 0,
           "can run here", never});
  check({"explicit selection on the CPU suggests only what runs there",
         {"resolve", "--platform", "cpu", "--role", "self", "--head-size", "96", "--diffusion-attention-backend",
          "SAGE_ATTN"},
         3, "Select TORCH_SDPA", "FLASH_ATTN"});
}

}  // namespace
}  // namespace diffattn::testing
