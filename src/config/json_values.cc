#include "config/json_values.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>

#include "common/json_duplicates.h"
#include "common/name_hints.h"

namespace diffattn::config_detail {

using nlohmann::json;

Status field_error(std::string_view field, std::string_view text) {
  std::string message(field);
  message += ": ";
  message += text;
  return InvalidConfig(std::move(message));
}

std::string_view json_type_name(const json& value) {
  if (value.is_number()) return "number";
  return value.type_name();
}

std::string brief_json(const json& value) {
  constexpr std::size_t kMaxChars = 60;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= kMaxChars) return text;
  // Cut on a character boundary: half a UTF-8 sequence would make the message unprintable as JSON.
  std::size_t cut = kMaxChars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

std::string repr(std::string_view text) {
  // Python's repr convention: single quotes unless the text holds a single quote and no double one.
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  const bool utf8 = is_valid_utf8(text);
  std::string out(1, quote);
  for (unsigned char c : text) {
    if (c == '\\' || c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::array<char, 64> buffer{};
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (ec != std::errc()) return "?";
  return std::string(buffer.data(), end);
}

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1;
      code = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      code = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinForLength[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

Status check_known_keys(const json& object, std::span<const std::string_view> valid, std::string_view field,
                        std::string_view where) {
  for (const auto& item : object.items()) {
    bool known = false;
    for (std::string_view key : valid) known = known || item.key() == key;
    if (!known) {
      return field_error(field, "unknown key " + repr(item.key()) + " in " + std::string(where) +
                                    "; valid keys: " + join(valid, ", ") + ".");
    }
  }
  return Status::Ok();
}

Result<double> read_number(const json& value, std::string_view field, std::string_view name) {
  if (!value.is_number()) {
    return field_error(field, std::string(name) + " must be a number; got " + std::string(json_type_name(value)) +
                                  " " + brief_json(value) + ".");
  }
  return value.get<double>();
}

Result<std::int64_t> read_integer(const json& value, std::string_view field, std::string_view name) {
  const std::string prefix = std::string(name) + " must be an integer";
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return field_error(field, prefix + " in the 64-bit range; got " + brief_json(value) + ".");
    }
    return static_cast<std::int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_number_float()) {
    const double d = value.get<double>();
    // 2^63 is the first double past the int64 range.
    constexpr double kLimit = 9223372036854775808.0;
    if (std::isfinite(d) && std::trunc(d) == d && d >= -kLimit && d < kLimit) return static_cast<std::int64_t>(d);
    return field_error(field, prefix + "; got " + brief_json(value) + ".");
  }
  return field_error(field, prefix + "; got " + std::string(json_type_name(value)) + " " + brief_json(value) + ".");
}

Result<std::optional<std::string>> read_optional_string(const json& value, std::string_view field,
                                                        std::string_view name) {
  if (value.is_null()) return std::optional<std::string>();
  if (!value.is_string()) {
    return field_error(field, std::string(name) + " must be a string; got " + std::string(json_type_name(value)) +
                                  " " + brief_json(value) + ".");
  }
  return std::optional<std::string>(value.get<std::string>());
}

Status check_printable(const json& value, std::string_view field, std::string_view name, int depth) {
  if (depth > kMaxJsonDepth) {
    return field_error(field, std::string(name) + " nests deeper than " + std::to_string(kMaxJsonDepth) +
                                  " levels; flatten it.");
  }
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    return field_error(field, std::string(name) + " holds a non-finite number; use finite values.");
  }
  if (value.is_string()) return check_utf8(value.get_ref<const std::string&>(), field, name);
  if (value.is_object()) {
    for (const auto& item : value.items()) {
      DIFFATTN_RETURN_IF_ERROR(check_utf8(item.key(), field, name));
      DIFFATTN_RETURN_IF_ERROR(check_printable(item.value(), field, name, depth + 1));
    }
  } else if (value.is_array()) {
    for (const auto& child : value) DIFFATTN_RETURN_IF_ERROR(check_printable(child, field, name, depth + 1));
  }
  return Status::Ok();
}

Status check_utf8(std::string_view text, std::string_view field, std::string_view name) {
  if (is_valid_utf8(text)) return Status::Ok();
  return field_error(field, std::string(name) + " holds text that is not valid UTF-8; use UTF-8 text.");
}

std::string sanitize_utf8(std::string_view text) {
  if (is_valid_utf8(text)) return std::string(text);
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    // Keep whole valid sequences; a byte that starts none becomes '?'.
    std::size_t length = 1;
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0xf0) {
      length = 4;
    } else if (c >= 0xe0) {
      length = 3;
    } else if (c >= 0xc0) {
      length = 2;
    }
    const std::string_view piece = text.substr(i, length);
    if (piece.size() == length && is_valid_utf8(piece)) {
      out += piece;
      i += length - 1;
    } else {
      out += '?';
    }
  }
  return out;
}

int json_text_depth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
      if (depth > deepest) deepest = depth;
      if (deepest > kMaxJsonDepth) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Result<json> parse_json_text(std::string_view text, std::string_view what) {
  if (json_text_depth(text) > kMaxJsonDepth) {
    return InvalidConfig(std::string(what) + " nests deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels; a configuration needs at most a few.");
  }
  // nlohmann reports malformed text (and number overflow) by exception; it stops here.
  try {
    std::string duplicate;
    json value = parse_json_noting_duplicates(text, duplicate, /*allow_exceptions=*/true);
    if (!duplicate.empty())
      return InvalidConfig(std::string(what) + " has the key '" + sanitize_utf8(bounded_echo(duplicate)) +
                           "' twice; keep one (a repeated key would silently override the first).");
    return value;
  } catch (const json::exception& e) {
    return InvalidConfig(std::string(what) + " is not valid JSON: " + sanitize_utf8(e.what()) +
                         ". Quote the whole object, e.g. '{\"default\": {\"backend\": \"FLASH_ATTN\"}}'.");
  }
}

}  // namespace diffattn::config_detail
