#include "cli/output.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "common/json_text.h"
#include "diffattn/status.h"

namespace diffattn::cli {
namespace {

std::string render_row(const std::vector<std::string>& row, const std::vector<std::size_t>& widths) {
  std::string line;
  for (std::size_t c = 0; c < widths.size(); ++c) {
    const std::string cell = c < row.size() ? row[c] : "";
    line += cell;
    if (c + 1 < widths.size()) line += std::string(widths[c] - cell.size() + 2, ' ');
  }
  return line + "\n";
}

}  // namespace

std::string Table::render() const {
  std::vector<std::size_t> widths(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (std::size_t c = 0; c < widths.size() && c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);

  std::string text = render_row(header_, widths);
  std::vector<std::string> rule;
  for (std::size_t w : widths) rule.emplace_back(w, '-');
  text += render_row(rule, widths);
  for (const auto& row : rows_) text += render_row(row, widths);
  return text;
}

void print_json(const nlohmann::json& document) {
  std::cout << json_text(document, 2) << std::endl;
}

int report_error(const Status& status, bool json) {
  const Status shown = status.ok() ? Internal("an error was reported without a cause") : status;
  std::cerr << "diffattn: error [" << error_code_name(shown.code()) << "]: " << shown.message()
            << std::endl;
  if (json) {
    const nlohmann::json error = {
        {"error", {{"code", std::string(error_code_name(shown.code()))}, {"message", shown.message()}}}};
    std::cout << json_text(error) << std::endl;
  }
  return exit_code_for(shown.code());
}

}  // namespace diffattn::cli
