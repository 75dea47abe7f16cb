// The `diffattn` entry point: help, subcommand dispatch and usage errors.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_runner.h"

namespace diffattn::testing {
namespace {

TEST(UsageCli, HelpListsSubcommandsAndExitCodes) {
  for (const char* flag : {"--help", "-h", "help"}) {
    const CliResult run = run_cli({flag});
    EXPECT_EQ(run.exit_code, 0) << flag;
    for (const char* needle : {"resolve", "backends", "attend", "run", "--diffusion-attention-config",
                               "DIFFUSION_ATTENTION_BACKEND", "Exit codes"}) {
      EXPECT_NE(run.out.find(needle), std::string::npos) << needle << " missing after " << flag;
    }
  }
}

TEST(UsageCli, EverySubcommandHasHelp) {
  for (const char* sub : {"resolve", "backends", "attend", "run", "tune"}) {
    const CliResult direct = run_cli({sub, "--help"});
    EXPECT_EQ(direct.exit_code, 0) << sub << ": " << direct.err;
    EXPECT_FALSE(direct.out.empty()) << sub;
    const CliResult via_help = run_cli({"help", sub});
    EXPECT_EQ(via_help.exit_code, 0) << sub;
    EXPECT_EQ(via_help.out, direct.out) << sub;
  }
}

TEST(UsageCli, UnknownSubcommandExitsTwoNamingTheChoices) {
  const CliResult run = run_cli({"frobnicate"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("frobnicate"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("resolve"), std::string::npos) << run.err;

  const CliResult json = run_cli({"frobnicate", "--json"});
  EXPECT_EQ(json.exit_code, 2);
  EXPECT_EQ(json.json()["error"]["code"], "invalid_config") << json.out;
}

TEST(UsageCli, LeadingFlagWithoutSubcommandIsAUsageError) {
  const CliResult run = run_cli({"--model", "wan2.1-14b"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("diffattn run --model"), std::string::npos) << run.err;
  EXPECT_EQ(run_cli({"help", "frobnicate"}).exit_code, 2);
}

TEST(UsageCli, NoArgumentsRunsTheMainJobOnItsEmbeddedDefault) {
  const CliResult probe = run_cli({"backends", "--json"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  if (probe.json()["platform"]["kind"] != "cpu") {
    GTEST_SKIP() << "a GPU is present: the embedded default is the large GPU workload, run by scripts/run.sh";
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "diffattn_no_args";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const CliResult run = run_cli({}, {}, dir.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("tiny-dit"), std::string::npos) << run.out;
  bool report_written = false;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    report_written = report_written || entry.path().filename() == "report.json";
  }
  EXPECT_TRUE(report_written) << "the main job writes its report under the working directory";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace diffattn::testing
