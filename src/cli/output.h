#pragma once
// Terminal output of the subcommands: aligned tables and one-line JSON documents.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/strings.h"  // join, for the subcommands
#include "common/text_table.h"

namespace diffattn::cli {

// The table lives in common/ because the runner's reports print tables too.
using Table = TextTable;

// Writes `document` to stdout, indented, followed by a newline.
void print_json(const nlohmann::json& document);

// "yes" / "no".
inline std::string yes_no(bool value) { return value ? "yes" : "no"; }

}  // namespace diffattn::cli
