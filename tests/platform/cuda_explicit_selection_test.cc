#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "platform/described_platforms.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;
using testing::CudaDescription;
using testing::described_cuda;
using testing::probed_like;

class CudaExplicitSelectionTest : public ::testing::Test {
 protected:
  void SetUp() override { register_builtin_backends(registry_); }
  Result<PlatformDecision> select(const PlatformInfo& info, std::string_view name, int head_size = 128) {
    return make_platform(info, registry_)->select_backend(name, head_size, LayerTraits::Unconstrained());
  }
  void expect_error(const PlatformInfo& info, std::string_view name, int head_size, ErrorCode code,
                    const std::string& message_part) {
    auto decision = select(info, name, head_size);
    ASSERT_FALSE(decision.ok()) << name << " was accepted on " << info.describe();
    EXPECT_EQ(decision.status().code(), code) << decision.status().message();
    EXPECT_THAT(decision.status().message(), HasSubstr(message_part));
  }
  void expect_accepted(const PlatformInfo& info, std::string_view name, int head_size, const std::string& canonical) {
    auto decision = select(info, name, head_size);
    ASSERT_TRUE(decision.ok()) << decision.status().ToString();
    EXPECT_EQ(decision->backend, canonical);
    EXPECT_TRUE(decision->considered.empty());
  }
  Registry registry_;
};

const CudaDescription kB200{.major = 10, .minor = 0, .cudnn_version = 91000, .flash_attn_4 = true,
                            .flashinfer = "0.6.16", .flashinfer_prefill = true, .trtllm_gen = true,
                            .sage_attn_3 = true};

TEST_F(CudaExplicitSelectionTest, NamesAreUpperCasedAndUnknownNamesListValidOnes) {
  expect_accepted(probed_like(9, 0), "flash_attn", 128, "FLASH_ATTN");
  expect_accepted(probed_like(9, 0), "Torch_Sdpa", 64, "TORCH_SDPA");
  expect_error(probed_like(9, 0), "FOO_ATTN", 128, ErrorCode::kUnknownBackend,
               "Unknown diffusion attention backend: 'FOO_ATTN'. Valid options are: TORCH_SDPA, FLASH_ATTN");
}

TEST_F(CudaExplicitSelectionTest, TrtllmNeedsDatacenterBlackwell) {
  for (auto [major, minor] : {std::pair{9, 0}, {8, 9}, {12, 0}, {12, 1}, {11, 0}, {7, 5}}) {
    SCOPED_TRACE(major * 10 + minor);
    expect_error(probed_like(major, minor), "TRTLLM_ATTN", 128, ErrorCode::kUnsupported,
                 "requires a datacenter Blackwell GPU (SM100 / SM103, compute capability 10.x)");
  }
  expect_error(probed_like(10, 0), "TRTLLM_ATTN", 128, ErrorCode::kUnavailable, "trtllm-gen");
  expect_accepted(described_cuda(kB200), "TRTLLM_ATTN", 128, "TRTLLM_ATTN");
  CudaDescription b300 = kB200;
  b300.minor = 3;
  expect_accepted(described_cuda(b300), "trtllm_attn", 128, "TRTLLM_ATTN");
  expect_error(described_cuda(kB200), "TRTLLM_ATTN", 64, ErrorCode::kUnsupported,
               "head_size=64 is unsupported. Supported head sizes: 128");
}

TEST_F(CudaExplicitSelectionTest, FlashAttnUnsupportedReasons) {
  expect_error(probed_like(10, 0), "FLASH_ATTN", 128, ErrorCode::kUnsupported,
               "FLASH_ATTN was explicitly selected but is unsupported on sm_100 (Blackwell requires an FA4-class kernel");
  expect_error(probed_like(12, 0), "FLASH_ATTN", 128, ErrorCode::kUnsupported, "Select CUDNN_ATTN or TORCH_SDPA");
  expect_error(probed_like(7, 5), "FLASH_ATTN", 128, ErrorCode::kUnsupported, "compute capability < 8.0");
  expect_error(described_cuda({.major = 9, .minor = 0}), "FLASH_ATTN", 128, ErrorCode::kUnsupported,
               "no FLASH_ATTN kernels are built for sm_90");
  expect_error(probed_like(9, 0), "FLASH_ATTN", 80, ErrorCode::kUnsupported,
               "head_size=80 is unsupported. Supported head sizes: 64, 96, 128, 192, 256");
  expect_accepted(described_cuda(kB200), "FLASH_ATTN", 128, "FLASH_ATTN");
  for (auto [major, minor] : {std::pair{8, 0}, {8, 6}, {8, 9}, {9, 0}}) {
    expect_accepted(probed_like(major, minor), "FLASH_ATTN", 128, "FLASH_ATTN");
  }
  expect_accepted(probed_like(9, 0), "FLASH_ATTN", -1, "FLASH_ATTN");
}

TEST_F(CudaExplicitSelectionTest, SageAttnArchitectureThenKernelsThenHeadSizes) {
  for (auto [major, minor] : {std::pair{7, 5}, {10, 0}, {12, 1}}) {
    SCOPED_TRACE(major * 10 + minor);
    expect_error(probed_like(major, minor), "SAGE_ATTN", 128, ErrorCode::kUnsupported,
                 "SAGE_ATTN was explicitly selected but does not provide a kernel for sm_");
  }
  for (auto [major, minor] : {std::pair{8, 0}, {8, 6}, {8, 9}}) expect_accepted(probed_like(major, minor), "SAGE_ATTN", 128, "SAGE_ATTN");
  expect_accepted(probed_like(9, 0), "SAGE_ATTN", 128, "SAGE_ATTN");
  expect_accepted(probed_like(9, 0), "SAGE_ATTN", 64, "SAGE_ATTN");
  expect_error(described_cuda({.major = 9, .minor = 0}), "SAGE_ATTN", 128, ErrorCode::kUnavailable,
               "SAGE_ATTN's CUDA kernels are not part of this diffattn build");
  expect_error(probed_like(9, 0), "SAGE_ATTN", 96, ErrorCode::kUnsupported, "Supported head sizes: 64, 128");
}

TEST_F(CudaExplicitSelectionTest, SageAttn3NeedsBlackwellThenItsHeadSizes) {
  expect_error(probed_like(9, 0), "SAGE_ATTN_3", 128, ErrorCode::kUnsupported,
               "requires a Blackwell-class GPU with compute capability >= 10.0");
  expect_error(probed_like(10, 0), "SAGE_ATTN_3", 128, ErrorCode::kUnavailable, "SAGE_ATTN_3 (FP4, Blackwell)");
  expect_accepted(described_cuda(kB200), "SAGE_ATTN_3", 256, "SAGE_ATTN_3");
  expect_error(described_cuda(kB200), "SAGE_ATTN_3", 96, ErrorCode::kUnsupported,
               "SAGE_ATTN_3 was explicitly selected but head_size=96 is unsupported. Supported head sizes: 64, 128, 256");
}

TEST_F(CudaExplicitSelectionTest, FlashinferAvailabilityPrefillAndHeadSizes) {
  CudaDescription sm120{.major = 12, .minor = 0, .cudnn_version = 90500};
  expect_error(described_cuda(sm120), "FLASHINFER_ATTN", 128, ErrorCode::kUnavailable,
               "FLASHINFER_ATTN's CUDA kernels are not part of this diffattn build for this GPU");
  sm120.flashinfer = "0.6.16";
  expect_error(described_cuda(sm120), "FLASHINFER_ATTN", 128, ErrorCode::kUnavailable,
               "BatchPrefillWithRaggedKVCacheWrapper");
  sm120.flashinfer_prefill = true;
  expect_accepted(described_cuda(sm120), "FLASHINFER_ATTN", 128, "FLASHINFER_ATTN");
  expect_error(described_cuda(sm120), "FLASHINFER_ATTN", 96, ErrorCode::kUnsupported,
               "head_size=96 is unsupported. Supported head sizes: 64, 128, 256");
  // An explicit option before Blackwell as well.
  expect_accepted(described_cuda({.major = 9, .minor = 0, .flashinfer = "0.6.16", .flashinfer_prefill = true}),
                  "FLASHINFER_ATTN", 64, "FLASHINFER_ATTN");
}

TEST_F(CudaExplicitSelectionTest, CudnnHeadSizeRuleOnEveryGpuAndCudnnPresent) {
  const CudaDescription sm120{.major = 12, .minor = 0, .cudnn_version = 90500};
  expect_error(described_cuda(sm120), "CUDNN_ATTN", 12, ErrorCode::kUnsupported, "head_size=12 is unsupported");
  expect_accepted(described_cuda(sm120), "CUDNN_ATTN", 72, "CUDNN_ATTN");
  expect_error(probed_like(9, 0), "CUDNN_ATTN", 264, ErrorCode::kUnsupported,
               "multiple of 8 and at most 256. Select FLASHINFER_ATTN or TORCH_SDPA");
  expect_accepted(probed_like(9, 0), "CUDNN_ATTN", 128, "CUDNN_ATTN");
  expect_accepted(probed_like(8, 0), "CUDNN_ATTN", 72, "CUDNN_ATTN");
  expect_error(probed_like(9, 0, /*cudnn_version=*/0), "CUDNN_ATTN", 128, ErrorCode::kUnavailable,
               "needs cuDNN 9 or newer");
  expect_error(probed_like(9, 0, /*cudnn_version=*/8907), "CUDNN_ATTN", 128, ErrorCode::kUnavailable, "found cuDNN");
}

TEST_F(CudaExplicitSelectionTest, RainfusionAttnRunsOnAmpereToHopperWithItsKernels) {
  expect_accepted(probed_like(9, 0), "RAINFUSION_ATTN", 128, "RAINFUSION_ATTN");
  expect_accepted(probed_like(9, 0), "RAINFUSION_ATTN", 64, "RAINFUSION_ATTN");
  // Ampere and Ada run the fine pass on the mma.sync walk.
  expect_accepted(probed_like(8, 0), "RAINFUSION_ATTN", 128, "RAINFUSION_ATTN");
  expect_accepted(probed_like(8, 9), "RAINFUSION_ATTN", 64, "RAINFUSION_ATTN");
  for (auto [major, minor] : {std::pair{7, 5}, {10, 0}, {12, 0}}) {
    SCOPED_TRACE(major * 10 + minor);
    expect_error(probed_like(major, minor), "RAINFUSION_ATTN", 128, ErrorCode::kUnsupported,
                 "RAINFUSION_ATTN was explicitly selected but does not provide a kernel for sm_");
  }
  // sm_90 without the Hopper kernels in the build (a description without features.flash_attn): not
  // swapped for another backend.
  expect_error(described_cuda({.major = 9, .minor = 0}), "RAINFUSION_ATTN", 128, ErrorCode::kUnavailable,
               "RAINFUSION_ATTN was explicitly selected but is unavailable on described sm_90");
}

TEST_F(CudaExplicitSelectionTest, FastvideoVsaRunsOnAmpereToHopperWithItsKernels) {
  expect_accepted(probed_like(9, 0), "FASTVIDEO_VSA", 128, "FASTVIDEO_VSA");
  expect_accepted(probed_like(9, 0), "FASTVIDEO_VSA", 64, "FASTVIDEO_VSA");
  // Ampere and Ada run the fine pass on the mma.sync walk.
  expect_accepted(probed_like(8, 0), "FASTVIDEO_VSA", 128, "FASTVIDEO_VSA");
  expect_accepted(probed_like(8, 9), "FASTVIDEO_VSA", 64, "FASTVIDEO_VSA");
  for (auto [major, minor] : {std::pair{7, 5}, {10, 0}, {12, 0}}) {
    SCOPED_TRACE(major * 10 + minor);
    expect_error(probed_like(major, minor), "FASTVIDEO_VSA", 128, ErrorCode::kUnsupported,
                 "FASTVIDEO_VSA was explicitly selected but does not provide a kernel for sm_");
  }
  // sm_90 without the Hopper kernels in the build (a description without features.flash_attn).
  expect_error(described_cuda({.major = 9, .minor = 0}), "FASTVIDEO_VSA", 128, ErrorCode::kUnavailable,
               "block-sparse kernels");
  expect_error(probed_like(9, 0), "FASTVIDEO_VSA", 96, ErrorCode::kUnsupported, "Supported head sizes: 64, 128");
}

TEST_F(CudaExplicitSelectionTest, TorchSdpaRunsEverywhereWithinItsHeadSizes) {
  for (auto [major, minor] : {std::pair{7, 5}, {8, 0}, {9, 0}, {10, 0}, {12, 1}}) {
    expect_accepted(probed_like(major, minor), "TORCH_SDPA", 320, "TORCH_SDPA");
  }
  expect_error(probed_like(9, 0), "TORCH_SDPA", 600, ErrorCode::kUnsupported, "Supported head sizes: 8..512");
}

TEST_F(CudaExplicitSelectionTest, HopperDescriptionRejectsTrtllmNamingSm100) {
  auto h200 = load_platform(testing::platform_file("h200.json"));
  ASSERT_TRUE(h200.ok());
  expect_error(*h200, "TRTLLM_ATTN", 128, ErrorCode::kUnsupported, "SM100 / SM103");
  expect_error(*h200, "TRTLLM_ATTN", 128, ErrorCode::kUnsupported, "this is NVIDIA H200 (sm_90");
  EXPECT_EQ(exit_code_for(ErrorCode::kUnsupported), 3);
}

}  // namespace
}  // namespace diffattn
