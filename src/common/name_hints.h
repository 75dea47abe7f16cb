#pragma once
// Echoing what a user typed in a message, bounded (the nearest backend name is registry/nearest_backend_name.h).

#include <string>
#include <string_view>

namespace diffattn {

// `text` as the user wrote it, cut to at most `limit` bytes (never inside a UTF-8 character) with
// "..." appended when longer.
std::string bounded_echo(std::string_view text, std::size_t limit = 64);

}  // namespace diffattn
