#include "config/index_selector.h"

#include <charconv>
#include <string_view>

#include "config/json_values.h"
#include "diffattn/config.h"

namespace diffattn {
namespace {

std::string_view trim(std::string_view text) {
  const auto not_space = [](char c) { return c != ' ' && c != '\t'; };
  while (!text.empty() && !not_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && !not_space(text.back())) text.remove_suffix(1);
  return text;
}

// One non-negative index within kMaxLayerIndex; returns a reason on failure.
std::optional<std::string> parse_index(std::string_view text, std::int64_t& out) {
  text = trim(text);
  if (text.empty()) return "an index is missing";
  for (char c : text) {
    if (c < '0' || c > '9') return config_detail::repr(text) + " is not a non-negative integer";
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size() || out > config_detail::kMaxLayerIndex) {
    return "index " + std::string(text) + " is above the largest layer index " +
           std::to_string(config_detail::kMaxLayerIndex);
  }
  return std::nullopt;
}

}  // namespace

Result<std::set<std::int64_t>> parse_index_selector(std::string_view text, std::string_view field) {
  std::set<std::int64_t> indices;
  const auto fail = [&](const std::string& reason) -> Status {
    return InvalidConfig(std::string(field) + " is not a valid index selector (" + config_detail::repr(text) +
                         "): " + reason + ". Use comma-separated indices and ranges such as '0-3,38'.");
  };
  if (trim(text).empty()) return indices;
  // Overlapping ranges repeated many times would otherwise make a short selector cost seconds.
  constexpr std::int64_t kMaxExpandedIndices = 4 * (config_detail::kMaxLayerIndex + 1);
  std::int64_t expanded = 0;
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view token = trim(rest.substr(0, comma));
    if (token.empty()) return fail("an entry between commas is empty");
    const std::size_t dash = token.find('-');
    std::int64_t first = 0;
    std::int64_t last = 0;
    if (auto reason = parse_index(token.substr(0, dash), first)) return fail(*reason);
    last = first;
    if (dash != std::string_view::npos) {
      if (auto reason = parse_index(token.substr(dash + 1), last)) return fail(*reason);
      if (last < first) return fail("range " + std::string(token) + " runs backwards");
    }
    expanded += last - first + 1;
    if (expanded > kMaxExpandedIndices) {
      return fail("its ranges name more than " + std::to_string(kMaxExpandedIndices) + " indices in all");
    }
    for (std::int64_t i = first; i <= last; ++i) indices.insert(indices.end(), i);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return indices;
}

namespace config_detail {

std::string format_index_selector(const std::set<std::int64_t>& indices) {
  std::string out;
  for (std::int64_t i : indices) {
    if (!out.empty()) out += ',';
    out += std::to_string(i);
  }
  return out;
}

}  // namespace config_detail
}  // namespace diffattn
