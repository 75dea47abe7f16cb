// The `diffattn` tool: dispatches subcommands; with no arguments it runs the main job on its
// embedded default.

#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"

namespace {

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::vector<std::string>);
};

constexpr Subcommand kSubcommands[] = {
    {"run", "run a DiT model's attention workload through the configured backends (the main job)",
     diffattn::cli::run_workload},
    {"tune", "run every backend over a model's roles and write the fastest per role as a configuration",
     diffattn::cli::run_tune},
    {"resolve", "show which backend each attention role resolves to, and why", diffattn::cli::run_resolve},
    {"backends", "list every registered backend, whether it can run here, and its capabilities",
     diffattn::cli::run_backends},
    {"attend", "run one attention call on .npy arrays", diffattn::cli::run_attend},
};

void print_usage(std::ostream& out) {
  out << "usage: diffattn [SUBCOMMAND] [FLAGS]\n"
         "\n"
         "Selects and runs attention backends for diffusion transformers. Without arguments, runs the\n"
         "main job (`diffattn run`) on its embedded default workload.\n"
         "\n"
         "Subcommands:\n";
  for (const auto& s : kSubcommands) {
    out << "  " << s.name << std::string(10 - s.name.size(), ' ') << s.summary << "\n";
  }
  out << "  help      this text, or `diffattn help SUBCOMMAND` for one subcommand\n"
         "  version   the version of diffattn and whether this build has CUDA kernels (also --version)\n"
         "\n"
         "Flags every subcommand accepts:\n"
      << diffattn::cli::kCommonFlagsHelp
      << "\n"
         "Environment: DIFFUSION_ATTENTION_BACKEND=NAME sets the default backend when no flag does;\n"
         "DIFFATTN_LOG_LEVEL=debug|info|warning|error sets the log threshold.\n"
         "Exit codes: 0 success, 2 invalid configuration or usage, 3 valid but cannot run here, 1 other.\n";
}

const Subcommand* find_subcommand(std::string_view name) {
  for (const auto& s : kSubcommands) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string subcommand_names() {
  std::string names;
  for (const auto& s : kSubcommands) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return names + ", help, version";
}

int print_version() {
  std::cout << "diffattn " << DIFFATTN_VERSION_STRING << " ("
            << (DIFFATTN_HAVE_CUDA ? "with CUDA kernels" : "CPU-only build: no CUDA kernels") << ")\n";
  return 0;
}

int unknown_subcommand(const std::string& given, const std::vector<std::string>& args) {
  std::string message = "'" + given + "' is not a diffattn subcommand; subcommands: " + subcommand_names() + ".";
  if (given.starts_with("-")) {
    message += " Flags follow a subcommand, e.g. `diffattn run " + given + " ...`.";
  }
  return diffattn::cli::report_error(diffattn::cli::UsageError(message), diffattn::cli::wants_json(args));
}

int run_help(const std::vector<std::string>& topics) {
  if (topics.empty()) {
    print_usage(std::cout);
    return 0;
  }
  const Subcommand* s = find_subcommand(topics.front());
  if (s == nullptr) return unknown_subcommand(topics.front(), topics);
  return s->run({"--help"});
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return diffattn::cli::run_workload({});

  const std::string first = args.front();
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (first == "--help" || first == "-h") {
    print_usage(std::cout);
    return 0;
  }
  if (first == "help") return run_help(rest);
  if (first == "--version" || first == "version") return print_version();
  const Subcommand* s = find_subcommand(first);
  if (s == nullptr) return unknown_subcommand(first, args);
  return s->run(std::move(rest));
}
