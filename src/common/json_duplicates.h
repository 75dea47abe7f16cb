#pragma once
// JSON parsing that notices duplicate keys: nlohmann's parser keeps the last of two equal keys
// silently, so `{"backend": "A", "backend": "B"}` would mean B without a word.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace diffattn {

// Parses `text` like nlohmann::json::parse (throwing json::parse_error on malformed text when
// `allow_exceptions`, else returning a discarded value) and sets `duplicate` to the dotted path of
// the first key that appears twice in one object ("default.backend"), or leaves it empty.
nlohmann::json parse_json_noting_duplicates(std::string_view text, std::string& duplicate, bool allow_exceptions);

}  // namespace diffattn
