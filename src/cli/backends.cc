// `diffattn backends`: every registered backend, whether it can run on the platform and why not,
// its capabilities and summary; `--matrix` prints the backend x architecture routing matrix.

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/backend_matrix.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "platform/backend_checks.h"

namespace diffattn::cli {
namespace {

constexpr std::string_view kBackendsFlags = "--head-size N, --matrix and the common flags";

constexpr std::string_view kBackendsHelp =
    "usage: diffattn backends [--head-size N] [--platform cpu|cuda|FILE.json] [--json]\n"
    "       diffattn backends --matrix [--json]\n"
    "\n"
    "Lists every registered backend: whether an explicit selection of it can run on the platform (and\n"
    "the reason when not), which backend the platform picks by default, and each backend's capabilities\n"
    "(devices, dtypes, head sizes, masks, GQA, causal, the typed option blocks it reads).\n"
    "\n"
    "  --head-size N   also check head size N (default: head-size checks are skipped)\n"
    "  --matrix        the backend x architecture matrix (CPU, sm_75 ... sm_120/121) as Markdown: which\n"
    "                  backend is the default, which can be selected explicitly, which are rejected and why\n"
    "\n"
    "Common flags:\n";

struct BackendRow {
  const BackendDescriptor* descriptor = nullptr;
  std::optional<std::string> unavailable;  // why an explicit selection cannot run here
};

std::string device_name(DeviceKind kind) { return kind == DeviceKind::kCpu ? "cpu" : "cuda"; }

std::vector<std::string> device_names(const Capabilities& caps) {
  std::vector<std::string> names;
  for (DeviceKind d : caps.devices) names.push_back(device_name(d));
  return names;
}

std::vector<std::string> dtype_names(const Capabilities& caps) {
  std::vector<std::string> names;
  for (DType d : caps.dtypes) names.emplace_back(dtype_name(d));
  return names;
}

std::vector<std::string> mask_names(const Capabilities& caps) {
  std::vector<std::string> names;
  if (caps.key_padding_mask) names.emplace_back("key-padding");
  if (caps.dense_mask) names.emplace_back("dense");
  return names;
}

nlohmann::json capabilities_to_json(const Capabilities& caps) {
  return {{"devices", device_names(caps)},
          {"dtypes", dtype_names(caps)},
          {"head_sizes", caps.head_size_rule()},
          {"key_padding_mask", caps.key_padding_mask},
          {"dense_mask", caps.dense_mask},
          {"gqa", caps.gqa},
          {"causal", caps.causal},
          {"lse", caps.lse},
          {"varlen", caps.varlen},
          {"cross", caps.cross},
          {"needs_video_geometry", caps.needs_video_geometry},
          {"gate", caps.gate},
          {"option_blocks", caps.option_blocks}};
}

// The platform words its refusals for someone who selected the backend; a listing selected nothing.
std::string as_listing_reason(std::string message, const std::string& backend) {
  for (const std::string& preamble : {backend + " was explicitly selected, but ", backend + " was explicitly selected but "}) {
    if (!message.starts_with(preamble)) continue;
    const std::string rest = message.substr(preamble.size());
    const bool verb_follows = rest.starts_with("is ") || rest.starts_with("does ") || rest.starts_with("requires ");
    return backend + (verb_follows ? " " : ": ") + rest;
  }
  return message;
}

// Why an explicit selection of `d` fails here: the platform's policy first, then the backend's own
// availability (kernels not built, a library missing).
std::optional<std::string> why_unavailable(const BackendDescriptor& d, const Platform& platform, int head_size,
                                           const Registry& registry) {
  auto decision = platform.select_backend(d.name, head_size, LayerTraits::Unconstrained());
  if (!decision.ok()) return as_listing_reason(decision.status().message(), d.name);
  if (!d.unavailable_reason) return std::nullopt;
  const std::optional<std::string> reason = d.unavailable_reason(platform.info());
  if (!reason) return std::nullopt;
  return platform_checks::suggest_only_runnable(*reason, registry, platform.info());
}

Result<std::vector<BackendRow>> collect_rows(const Registry& registry, const Platform& platform, int head_size) {
  std::vector<BackendRow> rows;
  for (const auto& name : registry.names()) {
    DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* d, registry.find(name));
    rows.push_back({d, why_unavailable(*d, platform, head_size, registry)});
  }
  return rows;
}

void print_human(const PlatformInfo& info, const std::vector<BackendRow>& rows, const std::string& default_backend,
                 int head_size) {
  std::cout << "Platform: " << info.describe() << " (" << info.origin << ")\n";
  std::cout << "Default backend here: " << default_backend
            << (head_size > 0 ? " (head size " + std::to_string(head_size) + ")" : " (any head size)") << "\n\n";
  Table table({"backend", "here", "devices", "dtypes", "head sizes", "masks", "GQA", "causal", "options"});
  for (const auto& r : rows) {
    const Capabilities& caps = r.descriptor->caps;
    table.add_row({r.descriptor->name, r.unavailable ? "no" : "yes", join(device_names(caps), ",", "-"),
                   join(dtype_names(caps), ",", "-"), caps.head_size_rule(), join(mask_names(caps), ",", "-"),
                   yes_no(caps.gqa), yes_no(caps.causal), join(caps.option_blocks, ",", "-")});
  }
  std::cout << table.render() << "\n";
  std::size_t available = 0;
  for (const auto& r : rows) {
    std::cout << r.descriptor->name << ": " << r.descriptor->summary << "\n";
    if (r.unavailable) std::cout << "  not here: " << *r.unavailable << "\n";
    if (!r.unavailable) ++available;
  }
  std::cout << "\n" << available << " of " << rows.size() << " registered backends can run here.\n";
}

nlohmann::json rows_to_json(const PlatformInfo& info, const std::vector<BackendRow>& rows,
                            const std::string& default_backend) {
  nlohmann::json backends = nlohmann::json::array();
  for (const auto& r : rows) {
    backends.push_back({{"name", r.descriptor->name},
                        {"summary", r.descriptor->summary},
                        {"available", !r.unavailable.has_value()},
                        {"reason", r.unavailable ? nlohmann::json(*r.unavailable) : nlohmann::json(nullptr)},
                        {"default", r.descriptor->name == default_backend},
                        {"capabilities", capabilities_to_json(r.descriptor->caps)}});
  }
  return {{"platform", platform_to_json(info)}, {"default_backend", default_backend}, {"backends", backends}};
}

int list_backends(const CommonOptions& options, int head_size) {
  auto info = platform_from_options(options);
  if (!info.ok()) return report_error(info.status(), options.json);
  const Registry& registry = global_registry();
  const auto platform = make_platform(*info, registry);
  auto rows = collect_rows(registry, *platform, head_size);
  if (!rows.ok()) return report_error(rows.status(), options.json);
  auto decision = platform->select_backend(std::nullopt, head_size, LayerTraits::Unconstrained());
  if (!decision.ok()) return report_error(decision.status(), options.json);

  if (options.json) {
    print_json(rows_to_json(*info, *rows, decision->backend));
  } else {
    print_human(*info, *rows, decision->backend, head_size);
  }
  return 0;
}

int backends_with_options(std::vector<std::string>& args, const CommonOptions& options) {
  ArgReader reader(args);
  auto head = reader.take_value("--head-size");
  if (!head.ok()) return report_error(head.status(), options.json);
  auto matrix = reader.take_switch("--matrix");
  if (!matrix.ok()) return report_error(matrix.status(), options.json);
  const Status leftover = reader.expect_empty("backends", kBackendsFlags);
  if (!leftover.ok()) return report_error(leftover, options.json);

  int head_size = 0;
  if (*head) {
    auto value = parse_integer(**head, "--head-size", 1, 4096);
    if (!value.ok()) return report_error(value.status(), options.json);
    head_size = static_cast<int>(*value);
  }
  if (*matrix) {
    if (!options.platform_spec.empty() || *head) {
      return report_error(UsageError("--matrix describes every architecture at head size " +
                                     std::to_string(kMatrixHeadSize) +
                                     "; drop --platform and --head-size, or drop --matrix."),
                          options.json);
    }
    return print_backend_matrix(global_registry(), options.json);
  }
  return list_backends(options, head_size);
}

}  // namespace

int run_backends(std::vector<std::string> args) { return run_subcommand(args, kBackendsHelp, backends_with_options); }

}  // namespace diffattn::cli
