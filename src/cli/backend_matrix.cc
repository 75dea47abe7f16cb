#include "cli/backend_matrix.h"

#include <iostream>
#include <map>
#include <optional>
#include <string_view>

#include "cli/commands.h"
#include "cli/output.h"
#include "common/json_text.h"
#include "diffattn/log.h"

namespace diffattn::cli {
namespace {

// Every optional dependency present: the routing policy alone decides each cell.
PlatformFeatures every_feature() {
  PlatformFeatures f;
  f.flash_attn = true;
  f.flash_attn_4 = true;
  f.flashinfer = "0.6.16";
  f.flashinfer_prefill = true;
  f.trtllm_gen = true;
  f.sage_attn = true;
  f.sage_attn_3 = true;
  return f;
}

PlatformInfo cuda_platform(int major, int minor, std::string device_name) {
  PlatformInfo info;
  info.kind = PlatformKind::kCuda;
  info.cc_major = major;
  info.cc_minor = minor;
  info.device_name = std::move(device_name);
  info.cudnn_version = 91000;
  info.features = every_feature();
  info.compiled_archs = {info.sm_string()};
  info.origin = "backend matrix";
  return info;
}

PlatformInfo cpu_platform() {
  PlatformInfo info;
  info.kind = PlatformKind::kCpu;
  info.device_name = "CPU";
  info.features = every_feature();
  info.origin = "backend matrix";
  return info;
}

enum class CellStatus { kDefault, kExplicitOk, kRejected };

struct Cell {
  CellStatus status = CellStatus::kRejected;
  std::string reason;  // why it is rejected: the platform's full message
  std::string brief;   // the same, without what the row and column already say
  bool operator==(const Cell& other) const { return status == other.status && brief == other.brief; }
};

std::string_view status_name(CellStatus status) {
  switch (status) {
    case CellStatus::kDefault: return "default";
    case CellStatus::kExplicitOk: return "explicit-ok";
    case CellStatus::kRejected: return "rejected";
  }
  return "rejected";
}

// The reason of a cell without what the row and column already say: the first sentence, without
// the device description; the full message is one `diffattn resolve` away.
std::string short_reason(const std::string& backend, const std::string& message, const PlatformInfo& info) {
  const auto sentence_end = message.find(". ");
  std::string text = sentence_end == std::string::npos ? message : message.substr(0, sentence_end + 1);
  const std::string preamble = backend + " was explicitly selected but ";
  if (text.starts_with(preamble)) text = backend + " " + text.substr(preamble.size());
  if (const auto device = text.find(" is unavailable on "); device != std::string::npos) {
    if (const auto colon = text.find(": ", device); colon != std::string::npos) text = text.substr(colon + 2);
  }
  if (const auto device = text.find("; this is "); device != std::string::npos) text.erase(device);
  const std::string sm = info.sm_string();
  for (auto at = sm.empty() ? std::string::npos : text.find(sm); at != std::string::npos; at = text.find(sm, at)) {
    text.replace(at, sm.size(), "this GPU");
  }
  return text;
}

std::string markdown_escape(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

Cell decide_cell(const BackendDescriptor& d, const Platform& platform, const std::string& default_backend) {
  auto explicit_choice = platform.select_backend(d.name, kMatrixHeadSize, LayerTraits::Unconstrained());
  std::optional<std::string> rejected;
  if (!explicit_choice.ok()) {
    rejected = explicit_choice.status().message();
  } else if (d.unavailable_reason) {
    rejected = d.unavailable_reason(platform.info());
  }
  if (rejected) return {CellStatus::kRejected, *rejected, short_reason(d.name, *rejected, platform.info())};
  if (d.name == default_backend) return {CellStatus::kDefault, "", ""};
  return {CellStatus::kExplicitOk, "", ""};
}

std::string cell_markdown(const BackendDescriptor& backend, const Cell& cell, const PlatformInfo& info) {
  if (cell.status == CellStatus::kRejected) return "rejected: " + markdown_escape(cell.brief);
  const std::string status = cell.status == CellStatus::kDefault ? "**default**" : "explicit-ok";
  return has_kernel_for(backend, info) ? status : status + " (no kernel in this build)";
}

// The platform default at kMatrixHeadSize, for a mask-free model or not.
Result<PlatformDecision> default_decision(const Platform& platform, bool allow_trtllm_default) {
  return platform.select_backend(std::nullopt, kMatrixHeadSize,
                                 LayerTraits{.allows_trtllm_default = allow_trtllm_default});
}

struct PlatformCells {
  PlatformInfo info;
  std::map<std::string, Cell> cells;  // by backend name
  PlatformDecision mask_free_default;
  PlatformDecision masked_default;
};

Result<std::vector<std::vector<PlatformCells>>> compute(const Registry& registry,
                                                        const std::vector<MatrixColumn>& columns) {
  std::vector<std::vector<PlatformCells>> result;
  for (const auto& column : columns) {
    std::vector<PlatformCells> per_platform;
    for (const auto& info : column.platforms) {
      const auto platform = make_platform(info, registry);
      DIFFATTN_ASSIGN_OR_RETURN(PlatformDecision mask_free, default_decision(*platform, true));
      DIFFATTN_ASSIGN_OR_RETURN(PlatformDecision masked, default_decision(*platform, false));
      PlatformCells pc{info, {}, mask_free, masked};
      for (const auto& name : registry.names()) {
        DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* d, registry.find(name));
        pc.cells[name] = decide_cell(*d, *platform, mask_free.backend);
      }
      per_platform.push_back(std::move(pc));
    }
    result.push_back(std::move(per_platform));
  }
  return result;
}

// One cell for a column: shared when its platforms agree, else one entry per architecture.
std::string column_cell_markdown(const std::vector<PlatformCells>& column, const BackendDescriptor& backend) {
  const std::string& name = backend.name;
  bool same = true;
  for (const auto& pc : column) same = same && pc.cells.at(name) == column.front().cells.at(name);
  if (same) return cell_markdown(backend, column.front().cells.at(name), column.front().info);
  std::vector<std::string> parts;
  for (const auto& pc : column) {
    parts.push_back(pc.info.sm_string() + ": " + cell_markdown(backend, pc.cells.at(name), pc.info));
  }
  return join(parts, "; ", "-");
}

std::string considered_markdown(const PlatformCells& pc) {
  std::vector<std::string> parts;
  for (const auto& c : pc.mask_free_default.considered) {
    parts.push_back(c.backend + " (" + markdown_escape(short_reason(c.backend, c.reason, pc.info)) + ")");
  }
  return join(parts, "; ", "-");
}

std::string arch_label(const PlatformInfo& info) {
  return info.kind == PlatformKind::kCpu ? "CPU" : info.sm_string() + " " + info.device_name;
}

std::string route_table_markdown(const std::vector<std::vector<PlatformCells>>& cells) {
  std::string text =
      "| architecture | default, mask-free model | default, model with masks | passed over (mask-free model) |\n"
      "|---|---|---|---|\n";
  for (const auto& column : cells) {
    for (const auto& pc : column) {
      text += "| " + arch_label(pc.info) + " | " + pc.mask_free_default.backend + " | " +
              pc.masked_default.backend + " | " + considered_markdown(pc) + " |\n";
    }
  }
  return text;
}

nlohmann::json decision_to_json(const PlatformDecision& decision) {
  nlohmann::json considered = nlohmann::json::array();
  for (const auto& c : decision.considered) considered.push_back({{"backend", c.backend}, {"reason", c.reason}});
  return {{"backend", decision.backend}, {"considered", considered}};
}

Result<std::string> matrix_text(const Registry& registry, bool json) {
  if (!json) return backend_matrix_markdown(registry);
  DIFFATTN_ASSIGN_OR_RETURN(const nlohmann::json document, backend_matrix_json(registry));
  return json_text(document, 2) + "\n";
}

}  // namespace

std::vector<MatrixColumn> matrix_columns() {
  return {
      {"CPU", {cpu_platform()}},
      {"sm_75", {cuda_platform(7, 5, "Tesla T4")}},
      {"sm_80/86", {cuda_platform(8, 0, "A100"), cuda_platform(8, 6, "RTX A6000")}},
      {"sm_89", {cuda_platform(8, 9, "L40S")}},
      {"sm_90", {cuda_platform(9, 0, "H200")}},
      {"sm_100/103", {cuda_platform(10, 0, "B200"), cuda_platform(10, 3, "B300")}},
      {"sm_120/121", {cuda_platform(12, 0, "RTX PRO 6000"), cuda_platform(12, 1, "GB10")}},
  };
}

bool has_kernel_for(const BackendDescriptor& backend, const PlatformInfo& info) {
  const DeviceKind device = info.kind == PlatformKind::kCuda ? DeviceKind::kCuda : DeviceKind::kCpu;
  const int cc = info.cc_major * 10 + info.cc_minor;
  for (const DeviceKernels& k : backend.kernels) {
    if (k.device != device) continue;
    if (device == DeviceKind::kCpu || k.archs.empty()) return true;
    for (const CapabilityRange& range : k.archs)
      if (range.contains(cc)) return true;
  }
  return false;
}

std::string kernels_in_this_build(const BackendDescriptor& backend) {
  return join(backend.kernels, " and ", "", [](const DeviceKernels& k) {
    return std::string(k.device == DeviceKind::kCuda ? "CUDA" : "CPU") + " (" + k.description + ")";
  });
}

Result<std::string> backend_matrix_markdown(const Registry& registry) {
  const auto columns = matrix_columns();
  DIFFATTN_ASSIGN_OR_RETURN(const auto cells, compute(registry, columns));

  std::string text = "| backend | kernels in this build |";
  std::string rule = "|---|---|";
  for (const auto& c : columns) {
    text += " " + c.label + " |";
    rule += "---|";
  }
  text += "\n" + rule + "\n";
  for (const auto& name : registry.names()) {
    DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* backend, registry.find(name));
    const std::string kernels = kernels_in_this_build(*backend);
    text += "| " + name + " | " + (kernels.empty() ? "none: registered, unavailable" : kernels) + " |";
    for (const auto& column : cells) text += " " + column_cell_markdown(column, *backend) + " |";
    text += "\n";
  }
  return text + "\n" + route_table_markdown(cells);
}

Result<nlohmann::json> backend_matrix_json(const Registry& registry) {
  const auto columns = matrix_columns();
  DIFFATTN_ASSIGN_OR_RETURN(const auto cells, compute(registry, columns));
  nlohmann::json platforms = nlohmann::json::array();
  for (std::size_t c = 0; c < columns.size(); ++c) {
    for (const auto& pc : cells[c]) {
      nlohmann::json backends = nlohmann::json::object();
      for (const auto& [name, cell] : pc.cells) {
        backends[name] = {{"status", std::string(status_name(cell.status))},
                          {"reason", cell.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(cell.reason)}};
      }
      platforms.push_back({{"column", columns[c].label},
                           {"platform", platform_to_json(pc.info)},
                           {"default_mask_free", decision_to_json(pc.mask_free_default)},
                           {"default_masked", decision_to_json(pc.masked_default)},
                           {"backends", backends}});
    }
  }
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& name : registry.names()) {
    DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* backend, registry.find(name));
    kernels[name] = kernels_in_this_build(*backend);
  }
  return nlohmann::json{{"head_size", kMatrixHeadSize}, {"kernels_in_this_build", kernels}, {"platforms", platforms}};
}

int print_backend_matrix(const Registry& registry, bool json) {
  // The platforms of the matrix are hypothetical: their routing log lines would only be noise.
  const LogSink previous = set_log_sink([](LogLevel, std::string_view) {});
  auto text = matrix_text(registry, json);
  set_log_sink(previous);
  if (!text.ok()) return report_error(text.status(), json);
  std::cout << *text;
  return 0;
}

}  // namespace diffattn::cli
