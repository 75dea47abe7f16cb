#include "common/name_hints.h"

#include <algorithm>
#include <cctype>

namespace diffattn {
namespace {

// Names longer than this are not typos of a backend name; comparing them would only cost time.
constexpr std::size_t kLongestComparable = 128;

char fold(char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); }

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (fold(a[i - 1]) == fold(b[j - 1]) ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string bounded_echo(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  // Cut on a character boundary: half a UTF-8 sequence would make the message unprintable as JSON.
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::optional<std::string> nearest_name(std::string_view given, const std::vector<std::string>& known) {
  if (given.empty() || given.size() > kLongestComparable) return std::nullopt;
  const std::size_t allowed = std::max<std::size_t>(2, given.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = allowed + 1;
  for (const std::string& name : known) {
    const std::size_t d = edit_distance(given, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view given, const std::vector<std::string>& known) {
  const std::optional<std::string> near = nearest_name(given, known);
  return near ? " Did you mean '" + *near + "'?" : "";
}

}  // namespace diffattn
