#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"

namespace diffattn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class NamedBackend final : public Backend {
 public:
  explicit NamedBackend(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  Status forward(const AttentionProblem&, void*) override { return Status::Ok(); }

 private:
  std::string name_;
};

BackendFactory factory_named(std::string name) {
  return [name](const BackendInit&) -> Result<std::unique_ptr<Backend>> {
    return std::unique_ptr<Backend>(std::make_unique<NamedBackend>(name));
  };
}

BackendDescriptor plugin_descriptor(std::string name) {
  BackendDescriptor d;
  d.name = std::move(name);
  d.caps.devices = {DeviceKind::kCpu};
  d.caps.dtypes = {DType::kFloat32};
  d.create = factory_named("plugin");
  return d;
}

TEST(RegistryTest, BuiltinsAreRegisteredInOrder) {
  Registry registry;
  register_builtin_backends(registry);
  EXPECT_THAT(registry.names(),
              ElementsAre("TORCH_SDPA", "FLASH_ATTN", "CUDNN_ATTN", "FLASHINFER_ATTN", "TRTLLM_ATTN", "SAGE_ATTN",
                          "SAGE_ATTN_3", "RAINFUSION_ATTN", "FASTVIDEO_VSA"));
}

TEST(RegistryTest, UnknownNameListsValidOptions) {
  Registry registry;
  register_builtin_backends(registry);
  auto missing = registry.find("FLASH_ATTN_9");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kUnknownBackend);
  EXPECT_EQ(missing.status().message(),
            "Unknown diffusion attention backend: 'FLASH_ATTN_9'. Did you mean 'FLASH_ATTN'? Valid options are: "
            "TORCH_SDPA, FLASH_ATTN, "
            "CUDNN_ATTN, FLASHINFER_ATTN, TRTLLM_ATTN, SAGE_ATTN, SAGE_ATTN_3, RAINFUSION_ATTN, FASTVIDEO_VSA");
}

TEST(RegistryTest, LookupIsCaseSensitive) {
  Registry registry;
  register_builtin_backends(registry);
  EXPECT_FALSE(registry.find("flash_attn").ok());
  EXPECT_TRUE(registry.find("FLASH_ATTN").ok());
}

TEST(RegistryTest, AddingAnExistingNamePointsToReplaceImplementation) {
  Registry registry;
  register_builtin_backends(registry);
  Status status = registry.add(plugin_descriptor("TORCH_SDPA"));
  EXPECT_EQ(status.code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(status.message(), HasSubstr("already registered"));
  EXPECT_THAT(status.message(), HasSubstr("replace_implementation"));
}

TEST(RegistryTest, NewNamesCanBeRegisteredAndCreated) {
  Registry registry;
  register_builtin_backends(registry);
  ASSERT_TRUE(registry.add(plugin_descriptor("MY_SPARSE_ATTN")).ok());
  EXPECT_EQ(registry.names().back(), "MY_SPARSE_ATTN");
  auto backend = registry.create("MY_SPARSE_ATTN", BackendInit{});
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  EXPECT_EQ((*backend)->name(), "plugin");
}

TEST(RegistryTest, RejectsBadNamesAndMissingFactories) {
  Registry registry;
  EXPECT_EQ(registry.add(plugin_descriptor("lower_case")).code(), ErrorCode::kInvalidConfig);
  EXPECT_EQ(registry.add(plugin_descriptor("")).code(), ErrorCode::kInvalidConfig);
  BackendDescriptor no_factory = plugin_descriptor("NO_FACTORY");
  no_factory.create = nullptr;
  EXPECT_THAT(registry.add(no_factory).message(), HasSubstr("without a factory"));
  EXPECT_TRUE(registry.names().empty());
}

TEST(RegistryTest, ReplaceImplementationKeepsTheNameAndLastWins) {
  Registry registry;
  register_builtin_backends(registry);
  const auto names_before = registry.names();
  ASSERT_TRUE(registry.replace_implementation("FLASHINFER_ATTN", factory_named("first")).ok());
  ASSERT_TRUE(registry.replace_implementation("FLASHINFER_ATTN", factory_named("second")).ok());
  EXPECT_TRUE(registry.is_overridden("FLASHINFER_ATTN"));
  EXPECT_FALSE(registry.is_overridden("TORCH_SDPA"));
  EXPECT_EQ(registry.names(), names_before);
  auto created = registry.create("FLASHINFER_ATTN", BackendInit{});
  ASSERT_TRUE(created.ok());
  EXPECT_EQ((*created)->name(), "second");

  registry.clear_override("FLASHINFER_ATTN");
  EXPECT_FALSE(registry.is_overridden("FLASHINFER_ATTN"));
  auto builtin = registry.create("FLASHINFER_ATTN", BackendInit{});  // the built-in factory again
  ASSERT_TRUE(builtin.ok()) << builtin.status().message();
  EXPECT_EQ((*builtin)->name(), "FLASHINFER_ATTN");
}

TEST(RegistryTest, ReplaceImplementationOfUnknownNameFails) {
  Registry registry;
  register_builtin_backends(registry);
  Status status = registry.replace_implementation("NOPE_ATTN", factory_named("x"));
  EXPECT_EQ(status.code(), ErrorCode::kUnknownBackend);
  EXPECT_THAT(status.message(), HasSubstr("Valid options are: TORCH_SDPA"));
  EXPECT_EQ(registry.replace_implementation("TORCH_SDPA", nullptr).code(), ErrorCode::kInvalidConfig);
}

TEST(RegistryTest, BackendsWithoutKernelsAreRegisteredButUnavailable) {
  Registry registry;
  register_builtin_backends(registry);
  PlatformInfo probe;
  probe.kind = PlatformKind::kCuda;
  probe.cc_major = 9;
  for (const char* name :
       {"TRTLLM_ATTN", "SAGE_ATTN_3"}) {
    SCOPED_TRACE(name);
    const BackendDescriptor* d = *registry.find(name);
    ASSERT_TRUE(d->unavailable_reason);
    std::optional<std::string> reason = d->unavailable_reason(probe);
    ASSERT_TRUE(reason.has_value());
    EXPECT_THAT(*reason, HasSubstr("not part of this diffattn build"));
    EXPECT_THAT(*reason, ::testing::ContainsRegex("[Ss]elect [A-Z_]+"));
    auto created = registry.create(name, BackendInit{});
    ASSERT_FALSE(created.ok());
    EXPECT_EQ(created.status().code(), ErrorCode::kUnavailable);
    EXPECT_EQ(created.status().message(), *reason);
  }
}

TEST(RegistryTest, DescribedFeaturesMakeLibraryBackendsAvailable) {
  Registry registry;
  register_builtin_backends(registry);
  PlatformInfo info;
  info.kind = PlatformKind::kCuda;
  info.cc_major = 10;
  info.features.flashinfer = "0.6.16";
  info.features.trtllm_gen = true;
  info.features.sage_attn = true;
  info.features.sage_attn_3 = true;
  for (const char* name : {"FLASHINFER_ATTN", "TRTLLM_ATTN", "SAGE_ATTN", "SAGE_ATTN_3"}) {
    EXPECT_FALSE((*registry.find(name))->unavailable_reason(info).has_value()) << name;
  }
  EXPECT_TRUE((*registry.find("RAINFUSION_ATTN"))->unavailable_reason(info).has_value());
}

TEST(RegistryTest, HeadSizeRulesFollowTheBackendMatrix) {
  Registry registry;
  register_builtin_backends(registry);
  auto caps = [&](const char* name) { return (*registry.find(name))->caps; };
  EXPECT_EQ(caps("TORCH_SDPA").head_size_rule(), "8..512");
  EXPECT_EQ(caps("FLASH_ATTN").head_size_rule(), "64, 96, 128, 192, 256");
  EXPECT_EQ(caps("CUDNN_ATTN").head_size_rule(), "multiples of 8 in 8..256");
  EXPECT_EQ(caps("FLASHINFER_ATTN").head_size_rule(), "64, 128, 256");
  EXPECT_EQ(caps("TRTLLM_ATTN").head_size_rule(), "128");
  EXPECT_EQ(caps("SAGE_ATTN").head_size_rule(), "64, 128");
  EXPECT_EQ(caps("SAGE_ATTN_3").head_size_rule(), "64, 128, 256");
  EXPECT_EQ(caps("FASTVIDEO_VSA").head_size_rule(), "64, 128");
  EXPECT_TRUE(caps("CUDNN_ATTN").supports_head_size(72));
  EXPECT_FALSE(caps("CUDNN_ATTN").supports_head_size(12));
  EXPECT_FALSE(caps("CUDNN_ATTN").supports_head_size(264));
  EXPECT_TRUE(caps("TORCH_SDPA").supports_head_size(320));
  EXPECT_FALSE(caps("TORCH_SDPA").supports_head_size(4));
  EXPECT_FALSE(caps("FLASH_ATTN").supports_head_size(80));
}

TEST(RegistryTest, OptionBlocksAreDeclaredPerBackend) {
  Registry registry;
  register_builtin_backends(registry);
  auto blocks = [&](const char* name) { return (*registry.find(name))->caps.option_blocks; };
  EXPECT_THAT(blocks("TRTLLM_ATTN"), ElementsAre("quant", "skip_softmax"));
  EXPECT_THAT(blocks("FLASHINFER_ATTN"), ElementsAre("quant"));
  EXPECT_THAT(blocks("RAINFUSION_ATTN"), ElementsAre("block_sparse"));
  EXPECT_THAT(blocks("FASTVIDEO_VSA"), ElementsAre("fastvideo_vsa_topk"));
  EXPECT_TRUE(blocks("TORCH_SDPA").empty());
  EXPECT_TRUE(blocks("FLASH_ATTN").empty());
}

TEST(RegistryTest, ConcurrentFirstUseOfGlobalRegistryFillsItOnce) {
  std::vector<std::thread> threads;
  std::vector<std::size_t> sizes(8);
  for (int t = 0; t < 8; ++t) threads.emplace_back([&, t] { sizes[t] = global_registry().names().size(); });
  for (auto& thread : threads) thread.join();
  for (std::size_t size : sizes) {
    EXPECT_GE(size, 9u);
    EXPECT_EQ(size, sizes[0]);
  }
}

}  // namespace
}  // namespace diffattn
