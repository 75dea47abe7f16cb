#pragma once
// Reading subcommand flags: each flag is removed from the argument list as it is read, so that
// whatever is left over is a usage error that names it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/schedule.h"
#include "diffattn/status.h"

namespace diffattn::cli {

// A usage error: exit code 2, like any other invalid configuration.
Status UsageError(std::string message);

// True when `args` asks for help (--help, -h) or for JSON output (--json), wherever it appears;
// read before parsing so that parse errors are reported in the form the user asked for.
bool wants_help(const std::vector<std::string>& args);
bool wants_json(const std::vector<std::string>& args);

// Parses a whole decimal integer in [min, max]; `flag` names the flag in the message.
Result<std::int64_t> parse_integer(std::string_view text, std::string_view flag, std::int64_t min,
                                   std::int64_t max);

// A --role value: ROLE or ROLE:CATEGORY (e.g. ltx2.audio_to_video:cross).
struct RoleFlag {
  std::string role;
  std::optional<std::string> category;
};
Result<RoleFlag> parse_role_flag(const std::string& text);

// The configuration the common flags describe, with DIFFUSION_ATTENTION_BACKEND applied by the
// environment rule (used only while nothing on the command line set a default).
Result<AttentionConfig> config_from_options(const CommonOptions& options);
// The attention schedule the --diffusion-attention-schedule flags describe, or nullopt for none.
Result<std::optional<AttentionSchedule>> schedule_from_options(const CommonOptions& options);
// The platform --platform names (cpu, cuda, FILE.json), or the probed one when it was not given.
Result<PlatformInfo> platform_from_options(const CommonOptions& options);

// The shared start of every subcommand: with --help it prints `help` and the common flags;
// otherwise it takes the common options (reporting a bad one in the form asked for) and runs
// `body` on the arguments that are left. A subcommand that does not run denoising steps refuses
// --diffusion-attention-schedule (`accepts_schedule` false).
using SubcommandBody = int (*)(std::vector<std::string>& args, const CommonOptions& options);
int run_subcommand(std::vector<std::string>& args, std::string_view help, SubcommandBody body,
                   bool accepts_schedule = false);

// The flags every subcommand accepts, for usage messages and help texts.
inline constexpr std::string_view kCommonFlagsHelp =
    "  --diffusion-attention-config JSON|@FILE      the whole configuration as one JSON object, or read\n"
    "                                               from FILE.json (at most 1 MiB)\n"
    "  --diffusion-attention-config.<path> VALUE    one setting, e.g. .per_role.cross.backend TORCH_SDPA\n"
    "  --diffusion-attention-backend NAME           default backend for every role (not with default.backend)\n"
    "  --fastvideo-vsa-topk N                       top-k cubes of FASTVIDEO_VSA (needs that backend)\n"
    "  --platform cpu|cuda|FILE.json                platform to decide for (default: probe this machine;\n"
    "                                               cpu and cuda in any case)\n"
    "  --plugin PATH                                load a plugin library's backends (repeatable); they run\n"
    "                                               only when named, never as defaults. A bare NAME.so is\n"
    "                                               the file in the current folder when there is one\n"
    "  --json                                       machine-readable output on stdout\n"
    "  Every flag also accepts the --flag=VALUE form.\n";

class ArgReader {
 public:
  explicit ArgReader(std::vector<std::string>& args) : args_(args) {}

  // Every "--name VALUE" / "--name=VALUE", in the order given.
  Result<std::vector<std::string>> take_all(std::string_view name);
  // At most one "--name VALUE" / "--name=VALUE"; giving it twice is an error.
  Result<std::optional<std::string>> take_value(std::string_view name);
  // A switch without a value ("--name"); "--name=..." is an error.
  Result<bool> take_switch(std::string_view name);
  // Whatever is left: an error naming the first leftover argument and the accepted flags.
  Status expect_empty(std::string_view command, std::string_view accepted) const;

 private:
  std::vector<std::string>& args_;
};

}  // namespace diffattn::cli
