// `diffattn backends` run as a separate process: every registered backend, availability with
// reasons, capabilities.

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_runner.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"

namespace diffattn::testing {
namespace {

const nlohmann::json* find_backend(const nlohmann::json& doc, const std::string& name) {
  for (const auto& b : doc["backends"]) {
    if (b["name"] == name) return &b;
  }
  return nullptr;
}

TEST(BackendsCli, ListsEveryRegisteredBackendWithAvailabilityAndCapabilities) {
  const CliResult run = run_cli({"backends", "--platform", "cpu", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = run.json();
  ASSERT_TRUE(doc.is_object()) << run.out;
  EXPECT_EQ(doc["platform"]["kind"], "cpu");
  EXPECT_EQ(doc["default_backend"], "TORCH_SDPA");

  const auto names = global_registry().names();
  ASSERT_EQ(doc["backends"].size(), names.size());
  for (const auto& name : names) {
    const nlohmann::json* b = find_backend(doc, name);
    ASSERT_NE(b, nullptr) << name << " missing";
    for (const char* key : {"available", "reason", "summary", "capabilities", "default"}) {
      EXPECT_TRUE(b->contains(key)) << name << " lacks " << key;
    }
    // Unavailable backends say why; available ones carry no reason.
    EXPECT_EQ((*b)["available"].get<bool>(), (*b)["reason"].is_null()) << b->dump();
    const auto& caps = (*b)["capabilities"];
    for (const char* key : {"devices", "dtypes", "head_sizes", "key_padding_mask", "dense_mask", "gqa", "causal",
                            "option_blocks"}) {
      EXPECT_TRUE(caps.contains(key)) << name << " capabilities lack " << key;
    }
  }

  const nlohmann::json* sdpa = find_backend(doc, "TORCH_SDPA");
  ASSERT_NE(sdpa, nullptr);
  EXPECT_TRUE((*sdpa)["available"].get<bool>());
  EXPECT_TRUE((*sdpa)["default"].get<bool>());
  const nlohmann::json* flash = find_backend(doc, "FLASH_ATTN");
  ASSERT_NE(flash, nullptr);
  EXPECT_FALSE((*flash)["available"].get<bool>()) << "FLASH_ATTN is CUDA-only";
  EXPECT_FALSE((*flash)["reason"].get<std::string>().empty());
}

TEST(BackendsCli, HopperDescriptionMakesFlashAttnTheDefault) {
  const CliResult run = run_cli({"backends", "--platform", platform_file("h200.json"), "--head-size", "128", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = run.json();
  EXPECT_EQ(doc["default_backend"], "FLASH_ATTN");
  const nlohmann::json* trtllm = find_backend(doc, "TRTLLM_ATTN");
  ASSERT_NE(trtllm, nullptr);
  EXPECT_FALSE((*trtllm)["available"].get<bool>());
  EXPECT_NE((*trtllm)["reason"].get<std::string>().find("SM100"), std::string::npos) << trtllm->dump();
}

TEST(BackendsCli, HumanOutputNamesEveryBackendAndWhyNot) {
  const CliResult run = run_cli({"backends", "--platform", "cpu"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const auto& name : global_registry().names()) {
    EXPECT_NE(run.out.find(name), std::string::npos) << name << " missing in\n" << run.out;
  }
  EXPECT_NE(run.out.find("not here:"), std::string::npos) << run.out;
}

TEST(BackendsCli, RejectsUnknownFlagsAndMatrixWithPlatform) {
  EXPECT_EQ(run_cli({"backends", "--bogus"}).exit_code, 2);
  EXPECT_EQ(run_cli({"backends", "--matrix", "--platform", "cpu"}).exit_code, 2);
  EXPECT_EQ(run_cli({"backends", "--head-size", "x"}).exit_code, 2);
}

}  // namespace
}  // namespace diffattn::testing
