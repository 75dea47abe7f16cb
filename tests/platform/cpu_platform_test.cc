#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "platform/described_platforms.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CpuPlatformTest : public ::testing::Test {
 protected:
  void SetUp() override { register_builtin_backends(registry_); }
  std::shared_ptr<const Platform> cpu() { return make_platform(testing::described_cpu(), registry_); }
  Registry registry_;
};

TEST_F(CpuPlatformTest, DefaultIsTorchSdpa) {
  for (int head_size : {-1, 8, 64, 80, 128, 512}) {
    auto decision = cpu()->select_backend(std::nullopt, head_size, LayerTraits::Unconstrained());
    ASSERT_TRUE(decision.ok()) << decision.status().ToString();
    EXPECT_EQ(decision->backend, "TORCH_SDPA");
    EXPECT_THAT(decision->considered, IsEmpty());
  }
}

TEST_F(CpuPlatformTest, CudaOnlyBackendsAreRejectedByName) {
  for (const char* name : {"FLASH_ATTN", "CUDNN_ATTN", "TRTLLM_ATTN", "SAGE_ATTN_3"}) {
    SCOPED_TRACE(name);
    auto decision = cpu()->select_backend(name, 128, LayerTraits::Unconstrained());
    ASSERT_FALSE(decision.ok());
    EXPECT_EQ(decision.status().code(), ErrorCode::kUnsupported);
    EXPECT_THAT(decision.status().message(),
                HasSubstr(std::string(name) + " runs on CUDA only, but the current platform is CPU. Select TORCH_SDPA"));
  }
}

TEST_F(CpuPlatformTest, ExplicitNamesAreUpperCasedAndValidated) {
  auto sdpa = cpu()->select_backend("torch_sdpa", 64, LayerTraits::Unconstrained());
  ASSERT_TRUE(sdpa.ok());
  EXPECT_EQ(sdpa->backend, "TORCH_SDPA");

  auto unknown = cpu()->select_backend("SDPA", 64, LayerTraits::Unconstrained());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), ErrorCode::kUnknownBackend);
  EXPECT_THAT(unknown.status().message(), HasSubstr("Valid options are: TORCH_SDPA, FLASH_ATTN"));

  auto flashinfer = cpu()->select_backend("flashinfer_attn", 64, LayerTraits::Unconstrained());
  ASSERT_TRUE(flashinfer.ok()) << flashinfer.status().message();
  EXPECT_EQ(flashinfer->backend, "FLASHINFER_ATTN");
  auto flashinfer_96 = cpu()->select_backend("FLASHINFER_ATTN", 96, LayerTraits::Unconstrained());
  ASSERT_FALSE(flashinfer_96.ok());
  EXPECT_THAT(flashinfer_96.status().message(), HasSubstr("Supported head sizes: 64, 128, 256"));

  auto sage = cpu()->select_backend("sage_attn", 64, LayerTraits::Unconstrained());
  ASSERT_TRUE(sage.ok()) << sage.status().message();
  EXPECT_EQ(sage->backend, "SAGE_ATTN");
  auto sage_96 = cpu()->select_backend("SAGE_ATTN", 96, LayerTraits::Unconstrained());
  ASSERT_FALSE(sage_96.ok());
  EXPECT_EQ(sage_96.status().code(), ErrorCode::kUnsupported);
  EXPECT_THAT(sage_96.status().message(), HasSubstr("64, 128"));

  auto vsa = cpu()->select_backend("FASTVIDEO_VSA", 64, LayerTraits::Unconstrained());
  ASSERT_TRUE(vsa.ok()) << vsa.status().message();
  EXPECT_EQ(vsa->backend, "FASTVIDEO_VSA");
  auto vsa_96 = cpu()->select_backend("FASTVIDEO_VSA", 96, LayerTraits::Unconstrained());
  ASSERT_FALSE(vsa_96.ok());
  EXPECT_EQ(vsa_96.status().code(), ErrorCode::kUnsupported);

  auto rainfusion = cpu()->select_backend("RAINFUSION_ATTN", 64, LayerTraits::Unconstrained());
  ASSERT_TRUE(rainfusion.ok()) << rainfusion.status().message();
  EXPECT_EQ(rainfusion->backend, "RAINFUSION_ATTN");

  auto big = cpu()->select_backend("TORCH_SDPA", 1024, LayerTraits::Unconstrained());
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), ErrorCode::kUnsupported);
}

TEST_F(CpuPlatformTest, DefaultOutsideEveryHeadSizeIsAnError) {
  auto decision = cpu()->select_backend(std::nullopt, 1024, LayerTraits::Unconstrained());
  ASSERT_FALSE(decision.ok());
  EXPECT_EQ(decision.status().code(), ErrorCode::kUnsupported);
  EXPECT_THAT(decision.status().message(), HasSubstr("TORCH_SDPA supports 8..512"));
}

TEST_F(CpuPlatformTest, NewCpuBackendsCanBeSelected) {
  BackendDescriptor plugin;
  plugin.name = "MY_CPU_ATTN";
  plugin.caps.devices = {DeviceKind::kCpu};
  plugin.caps.dtypes = {DType::kFloat32};
  plugin.create = [](const BackendInit&) -> Result<std::unique_ptr<Backend>> { return Unavailable("test"); };
  ASSERT_TRUE(registry_.add(plugin).ok());
  auto decision = cpu()->select_backend("my_cpu_attn", 64, LayerTraits::Unconstrained());
  ASSERT_TRUE(decision.ok()) << decision.status().ToString();
  EXPECT_EQ(decision->backend, "MY_CPU_ATTN");
}

}  // namespace
}  // namespace diffattn
