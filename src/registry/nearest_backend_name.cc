#include "registry/nearest_backend_name.h"

#include <algorithm>
#include <cctype>
#include <cstddef>

namespace diffattn {
namespace {

// Names longer than this are not typos of a backend name; it also bounds the work per candidate.
constexpr std::size_t kLongestTypo = 64;

std::string upper_copy(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool is_name_part(std::string_view part, std::string_view name) {
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t end = std::min(name.find('_', start), name.size());
    if (name.substr(start, end - start) == part) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::optional<std::string> nearest_backend_name(std::string_view given, const std::vector<std::string>& names) {
  if (given.empty() || given.size() > kLongestTypo) return std::nullopt;
  const std::string wanted = upper_copy(given);
  const std::size_t near_enough = std::max<std::size_t>(2, wanted.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const std::string& name : names) {
    const std::string candidate = upper_copy(name);
    const std::size_t distance = edit_distance(wanted, candidate);
    if (distance > near_enough && !is_name_part(wanted, candidate)) continue;
    if (!best || distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view given, const std::vector<std::string>& names) {
  const std::optional<std::string> nearest = nearest_backend_name(given, names);
  return nearest ? " Did you mean '" + *nearest + "'?" : "";
}

}  // namespace diffattn
