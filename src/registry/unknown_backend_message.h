#pragma once
// The one message for a backend name nobody registered: the name as the user wrote it (bounded),
// the nearest registered name when it looks like a typo, and the valid names.

#include <string>
#include <string_view>
#include <vector>

namespace diffattn {

std::string unknown_backend_message(std::string_view as_written, const std::vector<std::string>& valid);

}  // namespace diffattn
