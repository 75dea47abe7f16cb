#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "platform/described_platforms.h"

namespace diffattn {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::CudaDescription;
using testing::described_cuda;
using testing::probed_like;

auto candidate(const char* backend, const char* reason_part) {
  return ::testing::AllOf(Field(&Considered::backend, backend), Field(&Considered::reason, HasSubstr(reason_part)));
}

class CudaDefaultRoutingTest : public ::testing::Test {
 protected:
  void SetUp() override { register_builtin_backends(registry_); }
  Result<PlatformDecision> choose(const PlatformInfo& info, int head_size, bool allow_trtllm = true) {
    return make_platform(info, registry_)->select_backend(std::nullopt, head_size, LayerTraits{.allows_trtllm_default = allow_trtllm});
  }
  std::string backend(const PlatformInfo& info, int head_size, bool allow_trtllm = true) {
    auto decision = choose(info, head_size, allow_trtllm);
    return decision.ok() ? decision->backend : "error: " + decision.status().message();
  }
  Registry registry_;
};

struct ArchDefault {
  int major, minor;
  const char* expected;
};

// What a probe of this build reports on each architecture (FLASH_ATTN kernels on 8.x and 9.0,
// cuDNN 9.19, no optional libraries).
TEST_F(CudaDefaultRoutingTest, ProbedDevicesFromSm75ToSm121) {
  const ArchDefault cases[] = {{7, 5, "TORCH_SDPA"},  {8, 0, "FLASH_ATTN"},  {8, 6, "FLASH_ATTN"},
                               {8, 9, "FLASH_ATTN"},  {9, 0, "FLASH_ATTN"},  {10, 0, "CUDNN_ATTN"},
                               {10, 3, "CUDNN_ATTN"}, {11, 0, "CUDNN_ATTN"}, {12, 0, "CUDNN_ATTN"},
                               {12, 1, "CUDNN_ATTN"}};
  for (const ArchDefault& c : cases) {
    SCOPED_TRACE("sm_" + std::to_string(c.major) + std::to_string(c.minor));
    EXPECT_EQ(backend(probed_like(c.major, c.minor), 128), c.expected);
  }
}

TEST_F(CudaDefaultRoutingTest, PassedOverCandidatesCarryReasons) {
  auto t4 = choose(probed_like(7, 5), 128);
  ASSERT_TRUE(t4.ok());
  EXPECT_THAT(t4->considered, ElementsAre(candidate("FLASH_ATTN", "compute capability < 8.0")));

  auto h100 = choose(probed_like(9, 0), 128);
  ASSERT_TRUE(h100.ok());
  EXPECT_THAT(h100->considered, IsEmpty());

  auto b200 = choose(probed_like(10, 0), 128);
  ASSERT_TRUE(b200.ok());
  EXPECT_THAT(b200->considered, ElementsAre(candidate("TRTLLM_ATTN", "trtllm-gen FMHA kernels are not available")));

  auto thor = choose(probed_like(11, 0), 128);
  ASSERT_TRUE(thor.ok());
  EXPECT_THAT(thor->considered, ElementsAre(candidate("TRTLLM_ATTN", "SM100 / SM103) only; this is sm_110")));
}

TEST_F(CudaDefaultRoutingTest, DatacenterBlackwellPrefersTrtllmForMaskFreeHead128) {
  const CudaDescription full{.major = 10, .minor = 0, .cudnn_version = 91000, .flash_attn_4 = true,
                             .flashinfer = "0.6.16", .flashinfer_prefill = true, .trtllm_gen = true};
  EXPECT_EQ(backend(described_cuda(full), 128), "TRTLLM_ATTN");
  CudaDescription b300 = full;
  b300.minor = 3;
  EXPECT_EQ(backend(described_cuda(b300), 128), "TRTLLM_ATTN");

  auto masked_model = choose(described_cuda(full), 128, /*allow_trtllm=*/false);
  ASSERT_TRUE(masked_model.ok());
  EXPECT_EQ(masked_model->backend, "CUDNN_ATTN");
  EXPECT_THAT(masked_model->considered, ElementsAre(candidate("TRTLLM_ATTN", "allow_trtllm_default is false")));

  auto head64 = choose(described_cuda(full), 64);
  ASSERT_TRUE(head64.ok());
  EXPECT_EQ(head64->backend, "CUDNN_ATTN");
  EXPECT_THAT(head64->considered, ElementsAre(candidate("TRTLLM_ATTN", "head_size 64 != 128")));

  CudaDescription workstation = full;
  workstation.major = 12;
  EXPECT_EQ(backend(described_cuda(workstation), 128), "CUDNN_ATTN");
}

TEST_F(CudaDefaultRoutingTest, BlackwellWithOldCudnnFallsThroughFlashinferThenFa4ThenSdpa) {
  CudaDescription d{.major = 10, .minor = 0, .cudnn_version = 90400, .flash_attn_4 = true,
                    .flashinfer = "0.6.16", .flashinfer_prefill = true};
  auto flashinfer = choose(described_cuda(d), 128);
  ASSERT_TRUE(flashinfer.ok());
  EXPECT_EQ(flashinfer->backend, "FLASHINFER_ATTN");
  EXPECT_THAT(flashinfer->considered,
              ElementsAre(candidate("TRTLLM_ATTN", "trtllm-gen"), candidate("CUDNN_ATTN", "cuDNN 9.4.0 < 9.5")));

  d.flashinfer_prefill = false;
  auto fa4 = choose(described_cuda(d), 128);
  ASSERT_TRUE(fa4.ok());
  EXPECT_EQ(fa4->backend, "FLASH_ATTN");
  EXPECT_THAT(fa4->considered[2], candidate("FLASHINFER_ATTN", "BatchPrefillWithRaggedKVCacheWrapper"));

  d.flash_attn_4 = false;
  auto sdpa = choose(described_cuda(d), 128);
  ASSERT_TRUE(sdpa.ok());
  EXPECT_EQ(sdpa->backend, "TORCH_SDPA");
  ASSERT_EQ(sdpa->considered.size(), 4u);
  EXPECT_THAT(sdpa->considered[3], candidate("FLASH_ATTN", "Blackwell requires an FA4-class kernel"));

  d.cudnn_version = 0;
  auto no_cudnn = choose(described_cuda(d), 128);
  ASSERT_TRUE(no_cudnn.ok());
  EXPECT_THAT(no_cudnn->considered[1], candidate("CUDNN_ATTN", "no cuDNN library found"));
}

// The Python system's test_cuda_backend_selection case: an sm_120 device without FlashAttention.
TEST_F(CudaDefaultRoutingTest, WorkstationBlackwellCases) {
  const CudaDescription sm120{.major = 12, .minor = 0, .cudnn_version = 90500};
  EXPECT_EQ(backend(described_cuda(sm120), 128), "CUDNN_ATTN");
  EXPECT_EQ(backend(described_cuda(sm120), 320), "TORCH_SDPA");
  EXPECT_EQ(backend(described_cuda(sm120), 12), "TORCH_SDPA");
  auto h320 = choose(described_cuda(sm120), 320);
  ASSERT_TRUE(h320.ok());
  EXPECT_THAT(h320->considered[1], candidate("CUDNN_ATTN", "head_dim 320 is outside cuDNN fused attention"));

  CudaDescription old_cudnn_with_prefill = sm120;
  old_cudnn_with_prefill.cudnn_version = 90499;
  old_cudnn_with_prefill.flashinfer = "0.6.16";
  old_cudnn_with_prefill.flashinfer_prefill = true;
  EXPECT_EQ(backend(described_cuda(old_cudnn_with_prefill), 128), "FLASHINFER_ATTN");
  EXPECT_EQ(backend(described_cuda(old_cudnn_with_prefill), 72), "TORCH_SDPA");

  CudaDescription top_level_only = old_cudnn_with_prefill;
  top_level_only.flashinfer_prefill = false;
  EXPECT_EQ(backend(described_cuda(top_level_only), 128), "TORCH_SDPA");

  CudaDescription old_cudnn = sm120;
  old_cudnn.cudnn_version = 90499;
  EXPECT_EQ(backend(described_cuda(old_cudnn), 72), "TORCH_SDPA");
}

TEST_F(CudaDefaultRoutingTest, UnknownHeadSizeProbesStillRoute) {
  EXPECT_EQ(backend(probed_like(12, 0), -1), "CUDNN_ATTN");
  EXPECT_EQ(backend(probed_like(9, 0), -1), "FLASH_ATTN");
  EXPECT_EQ(backend(probed_like(7, 5), -1), "TORCH_SDPA");
}

TEST_F(CudaDefaultRoutingTest, CudnnAndFlashinferAreNeverAutomaticBeforeBlackwell) {
  CudaDescription hopper{.major = 9, .minor = 0, .cudnn_version = 91900, .flashinfer = "0.6.16",
                         .flashinfer_prefill = true, .trtllm_gen = true};
  auto decision = choose(described_cuda(hopper), 128);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision->backend, "TORCH_SDPA");
  EXPECT_THAT(decision->considered, ElementsAre(candidate("FLASH_ATTN", "no FLASH_ATTN kernels are built for sm_90")));
}

TEST_F(CudaDefaultRoutingTest, FlashAttnDefaultNeedsACompiledHeadSize) {
  auto head80 = choose(probed_like(9, 0), 80);
  ASSERT_TRUE(head80.ok());
  EXPECT_EQ(head80->backend, "TORCH_SDPA");
  EXPECT_THAT(head80->considered, ElementsAre(candidate("FLASH_ATTN", "head_size 80 is not compiled")));
}

TEST_F(CudaDefaultRoutingTest, NoBackendForTheHeadSizeIsAnError) {
  auto decision = choose(probed_like(9, 0), 600);
  ASSERT_FALSE(decision.ok());
  EXPECT_EQ(decision.status().code(), ErrorCode::kUnsupported);
  EXPECT_THAT(decision.status().message(), HasSubstr("head_size=600"));
  EXPECT_THAT(decision.status().message(), HasSubstr("TORCH_SDPA: head_size 600 is outside 8..512"));
}

TEST_F(CudaDefaultRoutingTest, DescriptionFilesRoute) {
  auto route = [&](const char* file, int head_size) {
    auto info = load_platform(testing::platform_file(file));
    return info.ok() ? backend(*info, head_size) : "error: " + info.status().message();
  };
  EXPECT_EQ(route("h200.json", 128), "FLASH_ATTN");
  EXPECT_EQ(route("a100.json", 64), "FLASH_ATTN");
  EXPECT_EQ(route("t4.json", 128), "TORCH_SDPA");
  EXPECT_EQ(route("b200.json", 128), "TRTLLM_ATTN");
  EXPECT_EQ(route("b200.json", 64), "CUDNN_ATTN");
  EXPECT_EQ(route("rtx_pro_6000.json", 128), "CUDNN_ATTN");
  EXPECT_EQ(route("rtx_pro_6000.json", 12), "TORCH_SDPA");
  EXPECT_EQ(route("cpu.json", 128), "TORCH_SDPA");
}

}  // namespace
}  // namespace diffattn
