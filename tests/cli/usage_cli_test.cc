// The `diffattn` entry point: help, subcommand dispatch and usage errors.

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
  for (const char* sub : {"resolve", "backends", "attend", "run"}) {
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

}  // namespace
}  // namespace diffattn::testing
