// `diffattn resolve`: which backend each attention role gets, from where, and what was passed over.

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/backend_matrix.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "common/json_text.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "models/model_zoo.h"

namespace diffattn::cli {
namespace {

constexpr std::string_view kResolveFlags =
    "--role ROLE[:CATEGORY], --head-size N, --no-trtllm-default, --model NAME and the common flags";

constexpr std::string_view kResolveHelp =
    "usage: diffattn resolve --role ROLE[:CATEGORY] [--role ...] --head-size N [--no-trtllm-default]\n"
    "       diffattn resolve --model NAME [--role ROLE ...] [--head-size N] [--no-trtllm-default]\n"
    "\n"
    "Prints, for every attention role, the backend it resolves to, where that choice came from\n"
    "(per_role, category, default, env, platform), the spec it received, and for platform defaults the\n"
    "backends passed over with their reasons. Resolution order: per_role[role], per_role[category],\n"
    "default, DIFFUSION_ATTENTION_BACKEND, then the platform default.\n"
    "\n"
    "  --role ROLE[:CATEGORY]   a role to resolve, with its broader category (e.g. ltx2.audio_to_video:cross);\n"
    "                           repeatable; with --model it picks roles of that model\n"
    "  --head-size N            head size of the roles (optional with --model, which declares it)\n"
    "  --no-trtllm-default      the model path is not mask-free: TRTLLM_ATTN is never chosen automatically\n"
    "  --model NAME             take roles, categories, head sizes and TRTLLM compatibility from the model zoo\n"
    "\n"
    "Common flags:\n";

struct RoleRequest {
  std::string role;
  std::optional<std::string> category;
  int head_size = 0;
};

struct ResolveRequest {
  std::vector<RoleRequest> roles;
  LayerTraits traits = LayerTraits::Unconstrained();
  std::optional<std::string> model_display_name;
};

// The subcommand's own flags, as given.
struct ResolveFlags {
  std::vector<std::string> roles;
  std::optional<int> head_size;
  bool no_trtllm_default = false;
  std::optional<std::string> model;
};

Result<RoleRequest> parse_role_request(const std::string& text) {
  DIFFATTN_ASSIGN_OR_RETURN(RoleFlag flag, parse_role_flag(text));
  return RoleRequest{std::move(flag.role), std::move(flag.category), 0};
}

Result<ResolveFlags> take_resolve_flags(std::vector<std::string>& args) {
  ArgReader reader(args);
  ResolveFlags flags;
  DIFFATTN_ASSIGN_OR_RETURN(flags.roles, reader.take_all("--role"));
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> head, reader.take_value("--head-size"));
  if (head) {
    DIFFATTN_ASSIGN_OR_RETURN(const std::int64_t value, parse_integer(*head, "--head-size", 1, 4096));
    flags.head_size = static_cast<int>(value);
  }
  DIFFATTN_ASSIGN_OR_RETURN(flags.no_trtllm_default, reader.take_switch("--no-trtllm-default"));
  DIFFATTN_ASSIGN_OR_RETURN(flags.model, reader.take_value("--model"));
  DIFFATTN_RETURN_IF_ERROR(reader.expect_empty("resolve", kResolveFlags));
  return flags;
}

std::vector<std::string> model_role_names(const ModelSpec& model) {
  std::vector<std::string> names;
  for (const auto& r : model.roles) names.push_back(r.role);
  return names;
}

// Roles of `model`, all of them or those --role names, with --head-size overriding the model's.
Result<ResolveRequest> request_from_model(const ResolveFlags& flags) {
  DIFFATTN_ASSIGN_OR_RETURN(const ModelSpec* model, find_model(*flags.model));
  ResolveRequest request;
  request.traits.allows_trtllm_default = model->attention_mask_free && !flags.no_trtllm_default;
  request.model_display_name = model->display_name;
  auto add = [&](const ModelRole& r) {
    request.roles.push_back({r.role, r.category, flags.head_size.value_or(r.head_size)});
  };
  if (flags.roles.empty()) {
    for (const auto& r : model->roles) add(r);
    return request;
  }
  for (const auto& text : flags.roles) {
    DIFFATTN_ASSIGN_OR_RETURN(const RoleRequest wanted, parse_role_request(text));
    const ModelRole* found = nullptr;
    for (const auto& r : model->roles) {
      if (r.role == wanted.role) found = &r;
    }
    if (found == nullptr) {
      return UsageError("model '" + model->name + "' has no role '" + wanted.role + "'; its roles are: " +
                        join(model_role_names(*model), ", ", "-") + ".");
    }
    if (wanted.category && wanted.category != found->category) {
      return UsageError("model '" + model->name + "' declares role '" + wanted.role + "' with category '" +
                        found->category.value_or("none") + "', not '" + *wanted.category +
                        "'; drop the category or use --role without --model.");
    }
    add(*found);
  }
  return request;
}

Result<ResolveRequest> request_from_flags(const ResolveFlags& flags) {
  if (flags.model) return request_from_model(flags);
  if (flags.roles.empty()) {
    return UsageError("diffattn resolve needs --role ROLE[:CATEGORY] (repeatable) with --head-size N, or "
                      "--model NAME; see diffattn resolve --help.");
  }
  if (!flags.head_size) {
    return UsageError("diffattn resolve --role needs --head-size N (the attention head size, e.g. 128), "
                      "or use --model NAME, which declares it.");
  }
  ResolveRequest request;
  request.traits.allows_trtllm_default = !flags.no_trtllm_default;
  for (const auto& text : flags.roles) {
    DIFFATTN_ASSIGN_OR_RETURN(RoleRequest role, parse_role_request(text));
    role.head_size = *flags.head_size;
    request.roles.push_back(std::move(role));
  }
  return request;
}

Result<std::vector<Resolution>> resolve_all(const ResolveRequest& request, const AttentionConfig& config,
                                            Selector& selector) {
  std::vector<Resolution> resolutions;
  for (const auto& r : request.roles) {
    std::optional<std::string_view> category;
    if (r.category) category = *r.category;
    DIFFATTN_ASSIGN_OR_RETURN(Resolution resolution,
                              selector.resolve(r.role, r.head_size, config, category,
                                               request.traits));
    resolutions.push_back(std::move(resolution));
  }
  return resolutions;
}

// Why this build of diffattn cannot run `backend` on the platform's kind of device, or nullopt:
// resolve plans for described platforms too, and a plan this build cannot execute must say so.
std::optional<std::string> missing_kernel(const std::string& backend, const PlatformInfo& info) {
  const auto descriptor = global_registry().find(backend);
  if (!descriptor.ok() || !(*descriptor)->origin.empty()) return std::nullopt;  // a plugin brings its own kernels
  if (kernels_in_this_build(**descriptor).empty())
    return backend + " is registered for planning, but this build of diffattn has no kernel for it";
  if (!has_kernel_for(**descriptor, info))
    return backend + " is registered for planning, but this build of diffattn has no " +
           (info.kind == PlatformKind::kCuda ? "CUDA kernel for it on " + info.sm_string() : "CPU kernel for it");
  if (info.kind == PlatformKind::kCuda && !DIFFATTN_HAVE_CUDA)
    return "this build of diffattn has no CUDA kernels (nvcc was not found when it was built)";
  return std::nullopt;
}

std::vector<std::string> passed_over_names(const Resolution& r) {
  std::vector<std::string> names;
  for (const auto& c : r.considered) names.push_back(c.backend);
  return names;
}

void print_table(const PlatformInfo& info, const ResolveRequest& request,
                 const std::vector<Resolution>& resolutions) {
  std::cout << "Platform: " << info.describe() << " (" << info.origin << ")\n";
  if (request.model_display_name) std::cout << "Model:    " << *request.model_display_name << "\n";
  std::cout << "TRTLLM_ATTN may be chosen automatically: " << yes_no(request.traits.allows_trtllm_default) << "\n\n";

  Table table({"role", "category", "head size", "backend", "source", "spec", "passed over"});
  for (const auto& r : resolutions) {
    table.add_row({r.role, r.category.value_or("-"), std::to_string(r.head_size), r.backend,
                   std::string(source_name(r.source)), r.spec ? json_text(spec_to_json(*r.spec)) : "-",
                   join(passed_over_names(r), ", ", "-")});
  }
  std::cout << table.render();

  bool kernel_header_printed = false;
  for (const auto& r : resolutions) {
    const std::optional<std::string> missing = missing_kernel(r.backend, info);
    if (!missing) continue;
    if (!kernel_header_printed) std::cout << "\nNo kernel in this build (diffattn attend and run cannot execute these):\n";
    kernel_header_printed = true;
    std::cout << "  " << r.role << ": " << *missing << "\n";
  }

  bool header_printed = false;
  for (const auto& r : resolutions) {
    for (const auto& c : r.considered) {
      if (!header_printed) std::cout << "\nPassed over:\n";
      header_printed = true;
      std::cout << "  " << r.role << ": " << c.backend << ": " << c.reason << "\n";
    }
  }
}

int resolve_with_options(std::vector<std::string>& args, const CommonOptions& options) {
  auto flags = take_resolve_flags(args);
  if (!flags.ok()) return report_error(flags.status(), options.json);
  auto request = request_from_flags(*flags);
  if (!request.ok()) return report_error(request.status(), options.json);
  auto config = config_from_options(options);
  if (!config.ok()) return report_error(config.status(), options.json);
  auto info = platform_from_options(options);
  if (!info.ok()) return report_error(info.status(), options.json);

  Selector selector(make_platform(*info, global_registry()), &global_registry());
  auto resolutions = resolve_all(*request, *config, selector);
  if (!resolutions.ok()) return report_error(resolutions.status(), options.json);

  if (options.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : *resolutions) {
      nlohmann::json entry = resolution_to_json(r);
      const std::optional<std::string> missing = missing_kernel(r.backend, *info);
      entry["kernel_in_this_build"] = !missing.has_value();
      if (missing) entry["no_kernel_reason"] = *missing;
      list.push_back(std::move(entry));
    }
    print_json({{"platform", platform_to_json(*info)}, {"resolutions", std::move(list)}});
  } else {
    print_table(*info, *request, *resolutions);
  }
  return 0;
}

}  // namespace

int run_resolve(std::vector<std::string> args) { return run_subcommand(args, kResolveHelp, resolve_with_options); }

}  // namespace diffattn::cli
