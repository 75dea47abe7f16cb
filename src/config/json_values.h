#pragma once
// Typed reads of JSON values for the configuration parsers: each read names the field it reads
// and says what was expected, so every parser reports errors the same way.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "diffattn/status.h"

namespace diffattn::config_detail {

// Deepest nesting any configuration surface accepts; deeper input is rejected, not recursed into.
inline constexpr int kMaxJsonDepth = 16;

// "default: <text>" as an invalid-configuration status.
Status field_error(std::string_view field, std::string_view text);

std::string_view json_type_name(const nlohmann::json& value);
// A value as it appeared in JSON, shortened for messages ("\"abc\"", "1.5", "[1,2,...]").
std::string brief_json(const nlohmann::json& value);
// Quotes a string the way the configuration messages show names: 'FLASH_ATTN' (bytes that are not
// UTF-8 are escaped, so messages stay printable).
std::string repr(std::string_view text);
std::string format_number(double value);
bool is_valid_utf8(std::string_view text);

// Every key of `object` must be one of `valid`; otherwise an error listing the valid keys.
Status check_known_keys(const nlohmann::json& object, std::span<const std::string_view> valid,
                        std::string_view field, std::string_view where);

// JSON numbers only (booleans and strings are rejected); `name` is the key path, e.g. "quant.q_block_size".
Result<double> read_number(const nlohmann::json& value, std::string_view field, std::string_view name);
// Integers, or numbers with an integral value; 1.5 is rejected.
Result<std::int64_t> read_integer(const nlohmann::json& value, std::string_view field, std::string_view name);
// A string, or null for "not set".
Result<std::optional<std::string>> read_optional_string(const nlohmann::json& value, std::string_view field,
                                                        std::string_view name);

// Rejects what JSON cannot print back anywhere inside `value`: NaN, infinities, strings or keys
// that are not UTF-8.
Status check_printable(const nlohmann::json& value, std::string_view field, std::string_view name, int depth = 0);

// Rejects a string field that is not UTF-8 (it could not be printed as JSON or in a message).
Status check_utf8(std::string_view text, std::string_view field, std::string_view name);
// Replaces bytes that are not UTF-8 with '?', for messages that quote outside text.
std::string sanitize_utf8(std::string_view text);

// Parses JSON text without exceptions escaping and without recursing deeper than kMaxJsonDepth.
Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view what);
// Nesting depth of JSON text, counted on brackets outside strings; stops counting past the limit.
int json_text_depth(std::string_view text);

}  // namespace diffattn::config_detail
