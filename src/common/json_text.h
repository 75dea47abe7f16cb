#pragma once
// JSON as text, for every document diffattn writes. Strings may hold bytes that are not UTF-8 (a
// path, a flag or a name as the user typed it); those become U+FFFD instead of an exception.

#include <string>

#include <nlohmann/json.hpp>

namespace diffattn {

// `indent` < 0: one line.
inline std::string json_text(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace diffattn
