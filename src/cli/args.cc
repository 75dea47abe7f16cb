#include "cli/args.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <utility>

#include "cli/commands.h"
#include "cli/tuned_config.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/log.h"
#include "diffattn/registry.h"

namespace diffattn::cli {
namespace {

constexpr std::string_view kConfigFlag = "--diffusion-attention-config";
constexpr std::string_view kBackendFlag = "--diffusion-attention-backend";
constexpr std::string_view kTopkFlag = "--fastvideo-vsa-topk";
constexpr std::string_view kScheduleFlag = "--diffusion-attention-schedule";
constexpr std::string_view kPlatformFlag = "--platform";
constexpr std::string_view kJsonFlag = "--json";
constexpr std::string_view kPluginFlag = "--plugin";

// One flag occurrence split into its name and, for "--name=value", its inline value.
struct SplitFlag {
  std::string_view name;
  std::optional<std::string_view> inline_value;
};

SplitFlag split_flag(std::string_view arg) {
  const auto eq = arg.find('=');
  if (eq == std::string_view::npos) return {arg, std::nullopt};
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

bool looks_like_flag(std::string_view arg) { return arg.size() > 2 && arg.substr(0, 2) == "--"; }

// The value of the flag at args[i]: inline after '=' or the next argument, which is then consumed.
Result<std::string> take_flag_value(std::vector<std::string>& args, std::size_t i, std::string_view name,
                                    std::optional<std::string_view> inline_value) {
  if (inline_value) return std::string(*inline_value);
  if (i + 1 >= args.size() || looks_like_flag(args[i + 1])) {
    return UsageError(std::string(name) + " needs a value: write " + std::string(name) +
                      " VALUE or " + std::string(name) + "=VALUE.");
  }
  std::string value = std::move(args[i + 1]);
  args.erase(args.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  return value;
}

// A configuration file is a small JSON object; anything larger is not one.
constexpr std::uintmax_t kMaxConfigFileBytes = 1 << 20;

// "@FILE" reads the configuration from FILE (as vLLM accepts a path); any other value is the JSON itself.
// `flag` names the flag in messages.
Result<std::string> config_json_from_value(std::string value, std::string_view flag = kConfigFlag) {
  if (!value.starts_with('@')) return value;
  const std::string path = value.substr(1);
  const std::string f(flag);
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (path.empty() || ec || !fs::exists(status))
    return UsageError(f + " @" + path + ": no such file; write @PATH to a JSON file, or "
                      "pass the JSON object itself.");
  if (!fs::is_regular_file(status))
    return UsageError(f + " @" + path + " is not a regular file (a directory or a device); "
                      "name a JSON file.");
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxConfigFileBytes)
    return UsageError(f + " @" + path + " is larger than " +
                      std::to_string(kMaxConfigFileBytes) + " bytes; a configuration is a small JSON object.");
  std::ifstream file(path, std::ios::binary);
  std::string text(std::istreambuf_iterator<char>(file), {});
  if (!file && !file.eof()) return UsageError(f + " @" + path + " could not be read.");
  return text;
}

// A bare library name ("name.so") means the file in the current folder when one is there, as users
// expect; dlopen alone would search only the system's library folders for it.
std::string plugin_path(std::string path) {
  if (path.find('/') != std::string::npos) return path;
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) ? "./" + path : path;
}

Status reject_repeat(bool already_set, std::string_view name, std::string_view instead) {
  if (!already_set) return Status::Ok();
  return UsageError(std::string(name) + " was given more than once; " + std::string(instead));
}

// Applies one common flag at args[i] to `options`; returns false (and leaves args alone) when the
// argument is not a common flag.
Result<bool> take_one_common_flag(std::vector<std::string>& args, std::size_t i, CommonOptions& options) {
  const SplitFlag flag = split_flag(args[i]);
  const std::string name(flag.name);
  auto value_of = [&]() { return take_flag_value(args, i, name, flag.inline_value); };

  if (flag.name == kJsonFlag) {
    if (flag.inline_value) return UsageError("--json takes no value; write --json alone.");
    options.json = true;
    return true;
  }
  if (flag.name == kConfigFlag) {
    DIFFATTN_RETURN_IF_ERROR(reject_repeat(options.config.config_json.has_value(), name,
                                           "pass one JSON object, or add settings with dotted "
                                           "--diffusion-attention-config.<path> VALUE flags."));
    DIFFATTN_ASSIGN_OR_RETURN(std::string value, value_of());
    if (value.starts_with('@')) options.config_file = value.substr(1);
    DIFFATTN_ASSIGN_OR_RETURN(std::string json, config_json_from_value(std::move(value)));
    options.config.config_json = std::move(json);
    return true;
  }
  if (flag.name.starts_with(kConfigFlag) && flag.name[kConfigFlag.size()] == '.') {
    const std::string path(flag.name.substr(kConfigFlag.size() + 1));
    if (path.empty() || path.back() == '.' || path.find("..") != std::string::npos) {
      return UsageError("'" + name + "' has an empty path segment; write e.g. "
                        "--diffusion-attention-config.per_role.cross.backend TORCH_SDPA.");
    }
    DIFFATTN_ASSIGN_OR_RETURN(std::string value, value_of());
    options.config.dotted.emplace_back(path, std::move(value));
    return true;
  }
  if (flag.name == kScheduleFlag) {
    DIFFATTN_RETURN_IF_ERROR(reject_repeat(options.schedule.json.has_value(), name,
                                           "pass one JSON object, or add settings with dotted "
                                           "--diffusion-attention-schedule.<path> VALUE flags."));
    DIFFATTN_ASSIGN_OR_RETURN(std::string value, value_of());
    DIFFATTN_ASSIGN_OR_RETURN(std::string json, config_json_from_value(std::move(value), kScheduleFlag));
    options.schedule.json = std::move(json);
    return true;
  }
  if (flag.name.starts_with(kScheduleFlag) && flag.name[kScheduleFlag.size()] == '.') {
    const std::string path(flag.name.substr(kScheduleFlag.size() + 1));
    if (path.empty() || path.back() == '.' || path.find("..") != std::string::npos) {
      return UsageError("'" + name + "' has an empty path segment; write e.g. "
                        "--diffusion-attention-schedule.profiles.sparse.default.backend SAGE_ATTN.");
    }
    DIFFATTN_ASSIGN_OR_RETURN(std::string value, value_of());
    options.schedule.dotted.emplace_back(path, std::move(value));
    return true;
  }
  if (flag.name == kBackendFlag) {
    DIFFATTN_RETURN_IF_ERROR(reject_repeat(options.config.backend_shorthand.has_value(), name,
                                           "name one default backend."));
    DIFFATTN_ASSIGN_OR_RETURN(std::string backend, value_of());
    options.config.backend_shorthand = std::move(backend);
    return true;
  }
  if (flag.name == kTopkFlag) {
    DIFFATTN_RETURN_IF_ERROR(reject_repeat(options.config.fastvideo_vsa_topk.has_value(), name,
                                           "give one top-k value."));
    DIFFATTN_ASSIGN_OR_RETURN(std::string text, value_of());
    DIFFATTN_ASSIGN_OR_RETURN(options.config.fastvideo_vsa_topk,
                              parse_integer(text, kTopkFlag, 1, std::int64_t{1} << 31));
    return true;
  }
  if (flag.name == kPluginFlag) {
    DIFFATTN_ASSIGN_OR_RETURN(std::string path, value_of());
    if (path.empty()) return UsageError("--plugin needs the path of a plugin library (a .so file).");
    options.plugins.push_back(plugin_path(std::move(path)));
    return true;
  }
  if (flag.name == kPlatformFlag) {
    DIFFATTN_RETURN_IF_ERROR(reject_repeat(!options.platform_spec.empty(), name,
                                           "choose one of cpu, cuda or a FILE.json description."));
    DIFFATTN_ASSIGN_OR_RETURN(std::string spec, value_of());
    if (spec.empty()) return UsageError("--platform needs cpu, cuda or the path of a FILE.json description.");
    options.platform_spec = std::move(spec);
    return true;
  }
  return false;
}

}  // namespace

Status UsageError(std::string message) { return InvalidConfig(std::move(message)); }

bool wants_help(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

bool wants_json(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == kJsonFlag) return true;
  }
  return false;
}

Result<std::int64_t> parse_integer(std::string_view text, std::string_view flag, std::int64_t min,
                                   std::int64_t max) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return UsageError(std::string(flag) + " expects a whole number, got '" + std::string(text) + "'.");
  }
  if (value < min || value > max) {
    return UsageError(std::string(flag) + " must be in [" + std::to_string(min) + ", " +
                      std::to_string(max) + "], got " + std::to_string(value) + ".");
  }
  return value;
}

Result<CommonOptions> take_common_options(std::vector<std::string>& args) {
  CommonOptions options;
  for (std::size_t i = 0; i < args.size();) {
    DIFFATTN_ASSIGN_OR_RETURN(const bool taken, take_one_common_flag(args, i, options));
    if (taken) {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return options;
}

int run_subcommand(std::vector<std::string>& args, std::string_view help, SubcommandBody body, bool accepts_schedule) {
  if (wants_help(args)) {
    std::cout << help << kCommonFlagsHelp;
    return 0;
  }
  const bool json = wants_json(args);
  env_log_threshold();  // an unknown DIFFATTN_LOG_LEVEL warns now, not only when something logs
  auto options = take_common_options(args);
  if (!options.ok()) return report_error(options.status(), json);
  if (!accepts_schedule && options->schedule.given()) {
    return report_error(UsageError("--diffusion-attention-schedule varies the backend over denoising steps, which only "
                                   "diffattn run executes; use it with diffattn run, or drop it here."),
                        json);
  }
  // Plugins join the process's registry before anything resolves, so their names can be selected.
  for (const std::string& path : options->plugins) {
    auto names = load_plugin(path, global_registry());
    if (!names.ok()) return report_error(names.status(), json);
  }
  return body(args, *options);
}

Result<RoleFlag> parse_role_flag(const std::string& text) {
  const auto colon = text.find(':');
  RoleFlag flag;
  flag.role = text.substr(0, colon);
  if (colon != std::string::npos) flag.category = text.substr(colon + 1);
  const bool bad_category = flag.category && (flag.category->empty() || flag.category->find(':') != std::string::npos);
  if (flag.role.empty() || bad_category) {
    return UsageError("--role '" + text + "' is not ROLE or ROLE:CATEGORY; write e.g. --role self or "
                      "--role ltx2.audio_to_video:cross.");
  }
  return flag;
}

Result<AttentionConfig> config_from_options(const CommonOptions& options) {
  return build_attention_config(options.config, env_attention_backend(), global_registry());
}

Result<std::optional<AttentionSchedule>> schedule_from_options(const CommonOptions& options) {
  return parse_attention_schedule(options.schedule, global_registry());
}

Result<PlatformInfo> platform_from_options(const CommonOptions& options) {
  Result<PlatformInfo> info = load_platform(options.platform_spec);
  if (info.ok() && !options.config_file.empty()) {
    if (auto warning = tuned_elsewhere_warning(options.config_file, *info)) log_warning(*warning);
  }
  return info;
}

Result<std::vector<std::string>> ArgReader::take_all(std::string_view name) {
  std::vector<std::string> values;
  for (std::size_t i = 0; i < args_.size();) {
    const SplitFlag flag = split_flag(args_[i]);
    if (flag.name != name) {
      ++i;
      continue;
    }
    DIFFATTN_ASSIGN_OR_RETURN(std::string value, take_flag_value(args_, i, name, flag.inline_value));
    values.push_back(std::move(value));
    args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return values;
}

Result<std::optional<std::string>> ArgReader::take_value(std::string_view name) {
  DIFFATTN_ASSIGN_OR_RETURN(std::vector<std::string> values, take_all(name));
  if (values.size() > 1) {
    return UsageError(std::string(name) + " was given " + std::to_string(values.size()) +
                      " times; give it once.");
  }
  if (values.empty()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(values.front()));
}

Result<bool> ArgReader::take_switch(std::string_view name) {
  bool seen = false;
  for (std::size_t i = 0; i < args_.size();) {
    const SplitFlag flag = split_flag(args_[i]);
    if (flag.name != name) {
      ++i;
      continue;
    }
    if (flag.inline_value) {
      return UsageError(std::string(name) + " takes no value; write " + std::string(name) + " alone.");
    }
    seen = true;
    args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return seen;
}

Status ArgReader::expect_empty(std::string_view command, std::string_view accepted) const {
  if (args_.empty()) return Status::Ok();
  const std::string& first = args_.front();
  const std::string what = looks_like_flag(first) ? "unknown flag '" + first + "'"
                                                  : "unexpected argument '" + first + "'";
  return UsageError("diffattn " + std::string(command) + ": " + what + ". Accepted: " +
                    std::string(accepted) + " (see diffattn " + std::string(command) + " --help).");
}

}  // namespace diffattn::cli
