#include "registry/nearest_backend_name.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <utility>

namespace diffattn {
namespace {

// Names longer than this are not typos of a backend name; it also bounds the work per candidate.
constexpr std::size_t kLongestTypo = 64;

// Upper case, with '-' and ' ' read as the '_' that separates a name's parts.
std::string normalised(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = (c == '-' || c == ' ') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string without_separators(std::string text) {
  std::erase(text, '_');
  return text;
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

// Whether `parts` is a run of whole '_'-separated parts of `name` ("SDPA", "MY_SPARSE" of MY_SPARSE_ATTN).
bool is_whole_parts(std::string_view parts, std::string_view name) {
  for (std::size_t at = name.find(parts); at != std::string_view::npos; at = name.find(parts, at + 1)) {
    const std::size_t end = at + parts.size();
    if ((at == 0 || name[at - 1] == '_') && (end == name.size() || name[end] == '_')) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> nearest_backend_name(std::string_view given, const std::vector<std::string>& names) {
  if (given.empty() || given.size() > kLongestTypo) return std::nullopt;
  const std::string wanted = normalised(given);
  const std::string wanted_letters = without_separators(wanted);
  const std::size_t near_enough = std::max<std::size_t>(2, wanted.size() / 3);
  std::optional<std::string> best;
  std::pair<std::size_t, std::size_t> best_distance;
  for (const std::string& name : names) {
    const std::string candidate = normalised(name);
    // Letters first (SAGE_ATTN3 is SAGE_ATTN_3 with a separator missing), then separators.
    const std::pair distance{edit_distance(wanted_letters, without_separators(candidate)),
                             edit_distance(wanted, candidate)};
    if (distance.first > near_enough && !is_whole_parts(wanted, candidate)) continue;
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
