// A backend declares what it needs of a platform as data in its own folder; the platform evaluates
// it without knowing the backend. These tests register a backend the platform has never heard of
// and check that explicit selection, the reasons and the block owners all follow its declaration.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "config/block_owners.h"
#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "platform/described_platforms.h"

namespace diffattn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::CudaDescription;
using testing::described_cuda;

// A new backend: Hopper only, cuDNN 9.5 or newer, head sizes 64 and 128, owns the quant block.
BackendDescriptor hopper_only_backend() {
  BackendDescriptor d;
  d.name = "HOPPER_ONLY_ATTN";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kBFloat16};
  d.caps.head_sizes = {64, 128};
  d.caps.option_blocks = {"quant"};
  d.cuda.needs = {
      need(PlatformFact::kArchitecture, "Hopper only; this is {sm}")
          .on({{90, 90}})
          .when_explicit("has kernels for sm_90 only; this is {sm}. Select {suggest} instead."),
      need(PlatformFact::kCudnn, "cuDNN {cudnn} < 9.5").at_least(90500)};
  d.create = [](const BackendInit&) -> Result<std::unique_ptr<Backend>> { return Unavailable("not in tests"); };
  return d;
}

class DeclaredRequirementsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_backends(registry_);
    ASSERT_TRUE(registry_.add(hopper_only_backend()).ok());
  }
  Result<PlatformDecision> select(const PlatformInfo& info, int head_size) {
    return make_platform(info, registry_)->select_backend("hopper_only_attn", head_size, LayerTraits{});
  }
  Registry registry_;
};

TEST_F(DeclaredRequirementsTest, ArchitectureNeedIsEvaluatedFromTheDeclaration) {
  // Any architecture outside the declared range, drawn fresh, is refused with the declared reason.
  std::mt19937 rng(std::random_device{}());
  const int majors[] = {7, 8, 10, 12};
  const int major = majors[std::uniform_int_distribution<int>(0, 3)(rng)];
  auto decision = select(described_cuda({.major = major, .minor = 0}), 128);
  ASSERT_FALSE(decision.ok());
  EXPECT_EQ(decision.status().code(), ErrorCode::kUnsupported);
  EXPECT_THAT(decision.status().message(),
              HasSubstr("HOPPER_ONLY_ATTN was explicitly selected but has kernels for sm_90 only; this is sm_" +
                        std::to_string(major) + "0. Select "));
}

TEST_F(DeclaredRequirementsTest, LibraryNeedsAreUnavailableAndNameWhatWasFound) {
  auto old_cudnn = select(described_cuda({.major = 9, .minor = 0, .cudnn_version = 90100}), 128);
  ASSERT_FALSE(old_cudnn.ok());
  EXPECT_EQ(old_cudnn.status().code(), ErrorCode::kUnavailable);
  // Without an explicit text the need's default reason is wrapped in the one explicit shape.
  EXPECT_THAT(old_cudnn.status().message(),
              HasSubstr("HOPPER_ONLY_ATTN was explicitly selected but is unsupported on sm_90 (cuDNN 9.1.0 < 9.5). "
                        "Select FLASH_ATTN or TORCH_SDPA instead."));

  auto accepted = select(described_cuda({.major = 9, .minor = 0, .cudnn_version = 91900}), 128);
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  EXPECT_EQ(accepted->backend, "HOPPER_ONLY_ATTN");

  auto head = select(described_cuda({.major = 9, .minor = 0, .cudnn_version = 91900}), 96);
  ASSERT_FALSE(head.ok());
  EXPECT_THAT(head.status().message(), HasSubstr("head_size=96 is unsupported. Supported head sizes: 64, 128"));
}

TEST_F(DeclaredRequirementsTest, BlockOwnersComeFromTheDescriptors) {
  const config_detail::BlockOwners quant = config_detail::block_owners("quant", registry_);
  EXPECT_THAT(quant.backends, ElementsAre("FLASHINFER_ATTN", "TRTLLM_ATTN", "HOPPER_ONLY_ATTN"));
  EXPECT_THAT(config_detail::block_owners("skip_softmax", registry_).backends, ElementsAre("TRTLLM_ATTN"));
  EXPECT_FALSE(config_detail::block_owner_violation(quant, "hopper_only_attn").has_value());
  EXPECT_THAT(config_detail::block_owner_violation(quant, "TORCH_SDPA").value_or(""),
              HasSubstr("set backend to FLASHINFER_ATTN or TRTLLM_ATTN or HOPPER_ONLY_ATTN"));
}

TEST_F(DeclaredRequirementsTest, ConfigurationParsingChecksOwnershipAgainstTheRegistryItIsGiven) {
  const auto spec = nlohmann::json::parse(R"({"backend": "HOPPER_ONLY_ATTN", "quant": {"dtype_qk": "int8"}})");
  EXPECT_TRUE(spec_from_json(spec, "default", registry_).ok());
  Registry builtins_only;
  register_builtin_backends(builtins_only);
  auto refused = spec_from_json(spec, "default", builtins_only);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("quant is only supported by the FLASHINFER_ATTN and TRTLLM_ATTN"));
}

}  // namespace
}  // namespace diffattn
