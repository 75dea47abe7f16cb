#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "diffattn/platform.h"
#include "platform/cudnn_version.h"
#include "platform/described_platforms.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

TEST(PlatformJsonTest, ParsesTheDesignExample) {
  const json value = json::parse(R"({"kind": "cuda", "compute_capability": "10.0", "device_name": "B200",
      "cudnn_version": "9.5.0", "features": {"flash_attn": true, "flash_attn_4": true, "flashinfer": "0.6.16",
      "flashinfer_prefill": true, "trtllm_gen": true, "sage_attn": true, "sage_attn_3": false, "plugins": []}})");
  auto info = platform_from_json(value);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->kind, PlatformKind::kCuda);
  EXPECT_EQ(info->cc_major, 10);
  EXPECT_EQ(info->cc_minor, 0);
  EXPECT_EQ(info->capability(), 100);
  EXPECT_EQ(info->sm_string(), "sm_100");
  EXPECT_EQ(info->device_name, "B200");
  EXPECT_EQ(info->cudnn_version, 90500);
  EXPECT_TRUE(info->features.flash_attn_4);
  EXPECT_EQ(info->features.flashinfer, "0.6.16");
  EXPECT_TRUE(info->features.trtllm_gen);
  EXPECT_FALSE(info->features.sage_attn_3);
}

TEST(PlatformJsonTest, AbsentFeaturesAreFalse) {
  auto info = platform_from_json(json::parse(R"({"kind": "cuda", "compute_capability": "8.9"})"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->features, PlatformFeatures{});
  EXPECT_EQ(info->cudnn_version, 0);
  EXPECT_EQ(info->sm_string(), "sm_89");
}

TEST(PlatformJsonTest, CudnnVersionAsStringOrInteger) {
  auto from_string = platform_from_json(json::parse(R"({"kind":"cuda","compute_capability":"9.0","cudnn_version":"9.19.0"})"));
  auto from_int = platform_from_json(json::parse(R"({"kind":"cuda","compute_capability":"9.0","cudnn_version":91900})"));
  auto short_form = platform_from_json(json::parse(R"({"kind":"cuda","compute_capability":"9.0","cudnn_version":"9.5"})"));
  ASSERT_TRUE(from_string.ok() && from_int.ok() && short_form.ok());
  EXPECT_EQ(from_string->cudnn_version, 91900);
  EXPECT_EQ(from_int->cudnn_version, 91900);
  EXPECT_EQ(short_form->cudnn_version, 90500);
  EXPECT_EQ(cudnn_version_string(90500), "9.5.0");
  EXPECT_EQ(cudnn_version_string(91900), "9.19.0");
  EXPECT_EQ(cudnn_version_string(8907), "8.9.7");
  EXPECT_EQ(*parse_cudnn_version("8.9.7"), 8907);
  EXPECT_FALSE(parse_cudnn_version("nine").ok());
  EXPECT_FALSE(parse_cudnn_version("9.5.0.1").ok());
  EXPECT_FALSE(parse_cudnn_version("9..0").ok());
  // cuDNN 8's encoding has a one-digit minor, and integers must be ones cudnnGetVersion reports
  // (the platform fuzzer found 45250 loading but printing back as "45.2.50").
  EXPECT_FALSE(parse_cudnn_version("8.15.3").ok());
  for (const char* number : {"45250", "9503", "7999", "90000000"}) {
    const auto odd = platform_from_json(
        json::parse(std::string(R"({"kind":"cuda","compute_capability":"9.0","cudnn_version":)") + number + "}"));
    EXPECT_FALSE(odd.ok()) << number;
  }
  EXPECT_TRUE(platform_from_json(json::parse(R"({"kind":"cuda","compute_capability":"9.0","cudnn_version":8907})")).ok());
}

struct BadCase {
  const char* text;
  const char* names;
};

TEST(PlatformJsonTest, ErrorsNameTheKey) {
  const BadCase cases[] = {
      {R"({"kind": "cuda", "compute_capability": "9.0", "gpu": "H200"})", "unknown key 'gpu'"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "features": {"flash": true}})", "unknown key 'features.flash'"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "features": {"flash_attn": "yes"}})", "'features.flash_attn' must be true or false"},
      {R"({"kind": "cuda", "compute_capability": 9.0})", "'compute_capability' must be a string"},
      {R"({"kind": "cuda", "compute_capability": "nine"})", "'compute_capability'"},
      {R"({"kind": "cuda", "compute_capability": "99.9"})", "MAJOR 1 to 15"},
      {R"({"kind": "cuda", "compute_capability": "0.1"})", "MAJOR 1 to 15"},
      {R"({"kind": "cuda", "compute_capability": "-9.0"})", "MAJOR 1 to 15"},
      {R"({"kind": "cuda", "compute_capability": "9.05"})", "MINOR 0 to 9"},
      {R"({"kind": "cuda", "compute_capability": " 9.0"})", "'compute_capability'"},
      {R"({"kind": "cuda", "compute_capability": "9."})", "'compute_capability'"},
      {R"({"kind": "cuda", "compute_capability": "+9.0"})", "'compute_capability'"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "features": {"plugins": ["/no/such/lib.so"]}})",
       "holds '/no/such/lib.so' (no such file); load a plugin library with --plugin PATH"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "features": {"plugins": ["my attn"]}})", "plugin backend names"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "cudnn_version": true})", "'cudnn_version'"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "cudnn_version": "banana"})", "cudnn_version 'banana'"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "sm_count": -3})", "'sm_count'"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "features": {"plugins": [1]}})", "'features.plugins'"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "features": {"flashinfer": true}})", "'features.flashinfer'"},
      {R"({"kind": "cuda", "compute_capability": "9.0", "compiled_archs": "sm_90a"})", "'compiled_archs'"},
      {R"({"kind": "tpu"})", "'kind' must be \"cpu\" or \"cuda\""},
      {R"({"kind": null})", "'kind' must be \"cpu\" or \"cuda\", got null."},
      {R"({"kind": "cuda", "compute_capability": "9.0", "device_name": null})", "'device_name' must be a string, got null."},
      {R"({"compute_capability": "9.0"})", "'kind' is required"},
      {R"({"kind": "cuda"})", "'compute_capability' is required"},
      {R"({"kind": "cpu", "compute_capability": "9.0"})", "applies to kind \"cuda\" only"},
      {R"([1, 2])", "must be a JSON object"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto info = platform_from_json(json::parse(c.text));
    ASSERT_FALSE(info.ok());
    EXPECT_EQ(info.status().code(), ErrorCode::kInvalidConfig);
    EXPECT_THAT(info.status().message(), HasSubstr(c.names));
  }
}

TEST(PlatformJsonTest, RoundTripsThroughJson) {
  PlatformInfo info = testing::described_cuda({.major = 12, .minor = 1, .cudnn_version = 90701, .flash_attn_4 = true,
                                               .flashinfer = "0.6.16", .flashinfer_prefill = true});
  info.sm_count = 48;
  info.compiled_archs = {"sm_80", "sm_90a"};
  info.features.plugins = {"MY_PLUGIN"};
  auto back = platform_from_json(platform_to_json(info));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, info);

  PlatformInfo cpu = testing::described_cpu();
  auto cpu_back = platform_from_json(platform_to_json(cpu));
  ASSERT_TRUE(cpu_back.ok()) << cpu_back.status().ToString();
  EXPECT_EQ(*cpu_back, cpu);
  EXPECT_FALSE(platform_to_json(cpu).contains("compute_capability"));
}

TEST(PlatformJsonTest, LoadsDescriptionFiles) {
  auto h200 = load_platform(testing::platform_file("h200.json"));
  ASSERT_TRUE(h200.ok()) << h200.status().ToString();
  EXPECT_EQ(h200->sm_string(), "sm_90");
  EXPECT_EQ(h200->cudnn_version, 91900);
  EXPECT_TRUE(h200->features.flash_attn);
  EXPECT_EQ(h200->origin, "h200.json");
  EXPECT_EQ(h200->describe(), "NVIDIA H200 (sm_90, 132 SMs, cuDNN 9.19.0)");

  for (const char* name : {"b200.json", "rtx_pro_6000.json", "a100.json", "t4.json", "cpu.json"}) {
    auto info = load_platform(testing::platform_file(name));
    EXPECT_TRUE(info.ok()) << name << ": " << info.status().ToString();
  }
}

TEST(PlatformJsonTest, MissingOrMalformedFilesAreConfigErrors) {
  auto missing = load_platform("/nonexistent/gpu.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(missing.status().message(), HasSubstr("neither 'cpu', 'cuda' nor a readable JSON"));

  const std::string path = ::testing::TempDir() + "/diffattn_bad_platform_json_test.json";
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs("{\"kind\": \"cuda\", ", file);
  std::fclose(file);
  auto malformed = load_platform(path);
  ASSERT_FALSE(malformed.ok());
  EXPECT_THAT(malformed.status().message(), HasSubstr("is not valid JSON"));
  std::remove(path.c_str());
}

TEST(PlatformProbeTest, CpuProbeDescribesTheMachine) {
  PlatformInfo cpu = probe_cpu_platform();
  EXPECT_EQ(cpu.kind, PlatformKind::kCpu);
  EXPECT_EQ(cpu.origin, "probe");
  EXPECT_FALSE(cpu.device_name.empty());
  EXPECT_EQ(cpu.sm_string(), "");
  EXPECT_THAT(cpu.describe(), HasSubstr("CPU ("));
#if defined(__x86_64__)
  EXPECT_THAT(cpu.device_name, HasSubstr("x86_64"));
  if (__builtin_cpu_supports("avx2")) EXPECT_THAT(cpu.device_name, HasSubstr("AVX2"));
#endif
  auto loaded = load_platform("cpu");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->kind, PlatformKind::kCpu);
}

TEST(PlatformProbeTest, CudaProbeReportsTheDeviceOrWhyNot) {
  auto cuda = probe_cuda_platform(0);
  if (!cuda.ok()) {
    EXPECT_EQ(cuda.status().code(), ErrorCode::kUnavailable);
    EXPECT_THAT(cuda.status().message(), HasSubstr("--platform"));
    auto fallback = load_platform("");
    ASSERT_TRUE(fallback.ok());
    EXPECT_EQ(fallback->kind, PlatformKind::kCpu);
    GTEST_SKIP() << "no CUDA device: " << cuda.status().message();
  }
  EXPECT_EQ(cuda->kind, PlatformKind::kCuda);
  EXPECT_GE(cuda->capability(), 50);
  EXPECT_GT(cuda->sm_count, 0);
  EXPECT_GT(cuda->cudnn_version, 0);
  EXPECT_FALSE(cuda->device_name.empty());
  EXPECT_EQ(cuda->compiled_archs, (std::vector<std::string>{"sm_80", "sm_90a"}));
  EXPECT_EQ(cuda->features.flash_attn, cuda->cc_major == 8 || cuda->capability() == 90);
  EXPECT_FALSE(probe_cuda_platform(1000).ok());
}

}  // namespace
}  // namespace diffattn
