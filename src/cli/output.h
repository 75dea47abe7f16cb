#pragma once
// Terminal output of the subcommands: aligned tables and one-line JSON documents.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/strings.h"  // join, for the subcommands

namespace diffattn::cli {

// Rows of cells printed as columns padded to their widest cell, with a rule under the header.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Writes `document` to stdout, indented, followed by a newline.
void print_json(const nlohmann::json& document);

// "yes" / "no".
inline std::string yes_no(bool value) { return value ? "yes" : "no"; }

}  // namespace diffattn::cli
