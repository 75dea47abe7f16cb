#include "registry/nearest_backend_name.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"

namespace diffattn {
namespace {

std::vector<std::string> builtin_names() {
  Registry registry;
  register_builtin_backends(registry);
  return registry.names();
}

TEST(NearestBackendName, TyposAndPartsFindTheRegisteredName) {
  const auto names = builtin_names();
  EXPECT_EQ(nearest_backend_name("SDPA", names), "TORCH_SDPA");
  EXPECT_EQ(nearest_backend_name("sdpa", names), "TORCH_SDPA");
  EXPECT_EQ(nearest_backend_name("torch-sdpa", names), "TORCH_SDPA");
  EXPECT_EQ(nearest_backend_name("TORCH_SPDA", names), "TORCH_SDPA");
  EXPECT_EQ(nearest_backend_name("flash_atn", names), "FLASH_ATTN");
  EXPECT_EQ(nearest_backend_name("FLASH", names), "FLASH_ATTN");
  EXPECT_EQ(nearest_backend_name("flashinfer", names), "FLASHINFER_ATTN");
  EXPECT_EQ(nearest_backend_name("SAGE_ATTN3", names), "SAGE_ATTN_3");
  EXPECT_EQ(nearest_backend_name("cudnn", names), "CUDNN_ATTN");
}

TEST(NearestBackendName, FarOrEmptyOrHugeNamesGetNoSuggestion) {
  const auto names = builtin_names();
  EXPECT_EQ(nearest_backend_name("", names), std::nullopt);
  EXPECT_EQ(nearest_backend_name("QQQQQ", names), std::nullopt);
  EXPECT_EQ(nearest_backend_name("FOO_ATTN_WITH_EXTRAS", names), std::nullopt);
  EXPECT_EQ(nearest_backend_name(std::string(100000, 'A'), names), std::nullopt);
  EXPECT_EQ(nearest_backend_name("SDPA", {}), std::nullopt);
}

TEST(NearestBackendName, PluginNamesAreCandidatesToo) {
  auto names = builtin_names();
  names.push_back("MY_SPARSE_ATTN");
  EXPECT_EQ(nearest_backend_name("my_sparse", names), "MY_SPARSE_ATTN");
  EXPECT_EQ(did_you_mean("MY_SPRASE_ATTN", names), " Did you mean 'MY_SPARSE_ATTN'?");
  EXPECT_EQ(did_you_mean("QQQQQ", names), "");
}

TEST(NearestBackendName, RegistryLookupFailuresCarryTheHint) {
  Registry registry;
  register_builtin_backends(registry);
  auto missing = registry.find("SDPA");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("Did you mean 'TORCH_SDPA'?"), std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace diffattn
