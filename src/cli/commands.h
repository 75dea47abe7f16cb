#pragma once
// Subcommands of the `diffattn` tool. Each takes the arguments after its name and returns the
// process exit code (0 ok, 2 invalid configuration or usage, 3 cannot run here, 1 anything else).

#include <optional>
#include <string>
#include <vector>

#include "diffattn/config.h"
#include "diffattn/schedule.h"
#include "diffattn/status.h"

namespace diffattn::cli {

// Flags every subcommand accepts: --diffusion-attention-config JSON, dotted
// --diffusion-attention-config.<path> VALUE, --diffusion-attention-backend NAME,
// --fastvideo-vsa-topk N, --platform {cpu|cuda|FILE.json}, --json.
struct CommonOptions {
  ConfigSources config;
  ScheduleSources schedule;  // --diffusion-attention-schedule JSON|@FILE and its dotted flags (diffattn run only)
  std::string platform_spec;  // empty: probe
  std::string config_file;    // the FILE of --diffusion-attention-config @FILE, if given so
  std::vector<std::string> plugins;  // --plugin PATH, in the order given
  bool json = false;
};

// Removes the common flags from `args` (both "--flag value" and "--flag=value" forms) and returns
// them; the remaining arguments are left in order for the subcommand.
Result<CommonOptions> take_common_options(std::vector<std::string>& args);

// Prints `status` as a readable line on stderr and, with `json`, as {"error": {"code", "message"}}
// on stdout; returns exit_code_for(status.code()).
int report_error(const Status& status, bool json);

int run_resolve(std::vector<std::string> args);
int run_backends(std::vector<std::string> args);
int run_attend(std::vector<std::string> args);
int run_workload(std::vector<std::string> args);  // `diffattn run`: the main job
int run_tune(std::vector<std::string> args);      // `diffattn tune`: run every backend, write the fastest per role

}  // namespace diffattn::cli
