// docs/backend_matrix.md embeds the output of `diffattn backends --matrix`; these tests keep the
// document, the routing and the kernels column true.

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cli/backend_matrix.h"
#include "cli/cli_runner.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"

namespace diffattn::testing {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The part of the document between the generated-section markers.
std::string generated_section(const std::string& doc) {
  const std::string begin = "<!-- BEGIN diffattn backends --matrix -->\n";
  const std::string end = "<!-- END diffattn backends --matrix -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return "";
  return doc.substr(b + begin.size(), e - b - begin.size());
}

TEST(BackendMatrixDoc, DocumentEmbedsTheCurrentMatrix) {
  const std::string doc = read_text(std::string(DIFFATTN_TEST_DATA_DIR) + "/../../docs/backend_matrix.md");
  ASSERT_FALSE(doc.empty()) << "docs/backend_matrix.md is missing";
  const CliResult run = run_cli({"backends", "--matrix"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(generated_section(doc), run.out)
      << "docs/backend_matrix.md is out of date: replace its generated section with the output of "
         "`diffattn backends --matrix`";
}

TEST(BackendMatrixDoc, MatrixJsonHasACellForEveryBackendOnEveryPlatform) {
  const CliResult run = run_cli({"backends", "--matrix", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json doc = run.json();
  const auto names = global_registry().names();
  std::size_t platforms = 0;
  for (const auto& column : cli::matrix_columns()) platforms += column.platforms.size();
  ASSERT_EQ(doc["platforms"].size(), platforms);
  for (const auto& p : doc["platforms"]) {
    for (const auto& name : names) {
      ASSERT_TRUE(p["backends"].contains(name)) << name;
      const std::string status = p["backends"][name]["status"];
      EXPECT_TRUE(status == "default" || status == "explicit-ok" || status == "rejected") << status;
      EXPECT_EQ(status == "rejected", p["backends"][name]["reason"].is_string()) << p["backends"][name].dump();
    }
    // Exactly one default per platform, and it is the one the route chose.
    int defaults = 0;
    for (const auto& name : names) defaults += p["backends"][name]["status"] == "default" ? 1 : 0;
    EXPECT_EQ(defaults, 1) << p["column"];
    EXPECT_EQ(p["backends"][p["default_mask_free"]["backend"].get<std::string>()]["status"], "default");
  }
}

TEST(BackendMatrixDoc, BackendsWithoutKernelsCannotBeCreated) {
  const Registry& registry = global_registry();
  BackendInit init;
  init.num_heads = 4;
  init.num_kv_heads = 4;
  init.head_size = 64;
  init.platform = probe_cpu_platform();
  int without_kernels = 0;
  for (const auto& name : registry.names()) {
    if (!cli::kernels_in_this_build(**registry.find(name)).empty()) continue;
    ++without_kernels;
    auto created = registry.create(name, init);
    EXPECT_FALSE(created.ok()) << name << " is listed without kernels but was created";
    if (!created.ok()) EXPECT_EQ(created.status().code(), ErrorCode::kUnavailable) << created.status().message();
  }
  EXPECT_GT(without_kernels, 0);
  // And the reference backend the column lists for the CPU really runs there.
  EXPECT_TRUE(registry.create("TORCH_SDPA", init).ok());
}

}  // namespace
}  // namespace diffattn::testing
