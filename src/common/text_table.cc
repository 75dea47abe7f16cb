#include "common/text_table.h"

#include <algorithm>
#include <cstddef>

namespace diffattn {
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

std::string TextTable::render() const {
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

}  // namespace diffattn
