#include "cli/backend_matrix.h"

#include <iostream>
#include <map>
#include <optional>
#include <string_view>

#include "cli/commands.h"
#include "cli/output.h"

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
  info.origin = "backend matrix";
  return info;
}

enum class CellStatus { kDefault, kExplicitOk, kRejected };

struct Cell {
  CellStatus status = CellStatus::kRejected;
  std::string reason;  // why it is rejected
  bool operator==(const Cell&) const = default;
};

std::string_view status_name(CellStatus status) {
  switch (status) {
    case CellStatus::kDefault: return "default";
    case CellStatus::kExplicitOk: return "explicit-ok";
    case CellStatus::kRejected: return "rejected";
  }
  return "rejected";
}

// The first sentence of a message: the cell says why, the full message is one `resolve` away.
std::string first_sentence(const std::string& message) {
  const auto end = message.find(". ");
  return end == std::string::npos ? message : message.substr(0, end + 1);
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
  auto explicit_choice = platform.select_backend(d.name, kMatrixHeadSize, /*allow_trtllm_default=*/true);
  if (!explicit_choice.ok()) return {CellStatus::kRejected, explicit_choice.status().message()};
  if (d.unavailable_reason) {
    if (auto reason = d.unavailable_reason(platform.info())) return {CellStatus::kRejected, *reason};
  }
  if (d.name == default_backend) return {CellStatus::kDefault, ""};
  return {CellStatus::kExplicitOk, ""};
}

std::string cell_markdown(const Cell& cell) {
  if (cell.status == CellStatus::kDefault) return "**default**";
  if (cell.status == CellStatus::kExplicitOk) return "explicit-ok";
  return "rejected: " + markdown_escape(first_sentence(cell.reason));
}

// The platform default at kMatrixHeadSize, for a mask-free model or not.
Result<PlatformDecision> default_decision(const Platform& platform, bool allow_trtllm_default) {
  return platform.select_backend(std::nullopt, kMatrixHeadSize, allow_trtllm_default);
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
std::string column_cell_markdown(const std::vector<PlatformCells>& column, const std::string& backend) {
  bool same = true;
  for (const auto& pc : column) same = same && pc.cells.at(backend) == column.front().cells.at(backend);
  if (same) return cell_markdown(column.front().cells.at(backend));
  std::vector<std::string> parts;
  for (const auto& pc : column) parts.push_back(pc.info.sm_string() + ": " + cell_markdown(pc.cells.at(backend)));
  return join(parts, "; ");
}

std::string considered_markdown(const PlatformDecision& decision) {
  std::vector<std::string> parts;
  for (const auto& c : decision.considered) {
    parts.push_back(c.backend + " (" + markdown_escape(first_sentence(c.reason)) + ")");
  }
  return join(parts, "; ");
}

std::string arch_label(const PlatformInfo& info) {
  return info.kind == PlatformKind::kCpu ? "CPU" : info.sm_string() + " " + info.device_name;
}

std::string route_table_markdown(const std::vector<std::vector<PlatformCells>>& cells) {
  std::string text =
      "| architecture | default, mask-free model | default, masked model | passed over (mask-free model) |\n"
      "|---|---|---|---|\n";
  for (const auto& column : cells) {
    for (const auto& pc : column) {
      text += "| " + arch_label(pc.info) + " | " + pc.mask_free_default.backend + " | " +
              pc.masked_default.backend + " | " + considered_markdown(pc.mask_free_default) + " |\n";
    }
  }
  return text;
}

nlohmann::json decision_to_json(const PlatformDecision& decision) {
  nlohmann::json considered = nlohmann::json::array();
  for (const auto& c : decision.considered) considered.push_back({{"backend", c.backend}, {"reason", c.reason}});
  return {{"backend", decision.backend}, {"considered", considered}};
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

std::string kernels_in_this_build(const std::string& backend) {
  static const std::map<std::string, std::string> kKernels = {
      {"TORCH_SDPA", "CPU (tiled, vectorised) and CUDA (tiled)"},
      {"FLASH_ATTN", "CUDA sm_80 (mma.sync) and sm_90a (wgmma + TMA); no FA4-class kernel"},
      {"CUDNN_ATTN", "CUDA, through the cuDNN 9 graph API"},
  };
  const auto it = kKernels.find(backend);
  return it == kKernels.end() ? "" : it->second;
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
    const std::string kernels = kernels_in_this_build(name);
    text += "| " + name + " | " + (kernels.empty() ? "none: registered, unavailable" : kernels) + " |";
    for (const auto& column : cells) text += " " + column_cell_markdown(column, name) + " |";
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
  for (const auto& name : registry.names()) kernels[name] = kernels_in_this_build(name);
  return nlohmann::json{{"head_size", kMatrixHeadSize}, {"kernels_in_this_build", kernels}, {"platforms", platforms}};
}

int print_backend_matrix(const Registry& registry, bool json) {
  if (json) {
    auto document = backend_matrix_json(registry);
    if (!document.ok()) return report_error(document.status(), json);
    print_json(*document);
  } else {
    auto text = backend_matrix_markdown(registry);
    if (!text.ok()) return report_error(text.status(), json);
    std::cout << *text;
  }
  return 0;
}

}  // namespace diffattn::cli
