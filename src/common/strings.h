#pragma once
// Text helpers every layer shares: the one join and the one upper-case conversion.

#include <string>
#include <string_view>

namespace diffattn {

std::string ascii_upper(std::string_view text);
std::string ascii_lower(std::string_view text);

struct AsText {
  template <typename T>
  std::string operator()(const T& item) const { return std::string(item); }
};

// The items of `items`, each turned to text by `to_text`, separated by `separator`; `empty` when
// there are none.
template <typename Range, typename ToText = AsText>
std::string join(const Range& items, std::string_view separator, std::string_view empty = "", ToText to_text = {}) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    out += to_text(item);
    first = false;
  }
  return first ? std::string(empty) : out;
}

// "a", "a and b", "a, b and c": a list as a sentence names it.
template <typename Range>
std::string join_as_sentence(const Range& items) {
  std::string out;
  std::size_t i = 0;
  const std::size_t n = std::size(items);
  for (const auto& item : items) {
    out += (i == 0 ? "" : i + 1 == n ? " and " : ", ") + std::string(item);
    ++i;
  }
  return out;
}

}  // namespace diffattn
