#pragma once
// Aligned text tables for terminal reports (the CLI's listings and the runner's run reports).

#include <string>
#include <utility>
#include <vector>

namespace diffattn {

// Rows of cells printed as columns padded to their widest cell, with a rule under the header.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace diffattn
