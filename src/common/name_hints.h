#pragma once
// Helpers for messages about names a user typed: echo them bounded, and suggest the closest known one.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffattn {

// `text` as the user wrote it, cut to at most `limit` bytes (never inside a UTF-8 character) with
// "..." appended when longer.
std::string bounded_echo(std::string_view text, std::size_t limit = 64);

// The known name closest to `given` (case-insensitive edit distance), when it is close enough to be
// a typo: at most 2 edits, or a third of the name's length for long names.
std::optional<std::string> nearest_name(std::string_view given, const std::vector<std::string>& known);

// " Did you mean 'NAME'?" when a name is close, else "".
std::string did_you_mean(std::string_view given, const std::vector<std::string>& known);

}  // namespace diffattn
