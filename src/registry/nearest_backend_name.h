#pragma once
// The registered backend name a mistyped one most likely meant, for "did you mean" hints on every
// surface that names a backend (configuration, --backend, --compare): one rule everywhere.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffattn {

// The name in `names` nearest to `given`, compared case-insensitively and with '-' read as '_': the
// smallest edit distance of the letters (then of the separators) among names within max(2,
// |given| / 3) edits of it or having it as a run of whole '_'-separated parts ("SDPA" ->
// TORCH_SDPA, "flash" -> FLASH_ATTN, "my_sparse" -> MY_SPARSE_ATTN); ties go to the earlier name. nullopt when none is
// near, when `given` is empty, or when it is far longer than any backend name.
std::optional<std::string> nearest_backend_name(std::string_view given, const std::vector<std::string>& names);

// " Did you mean 'NAME'?" for the nearest name, or "" when none is near.
std::string did_you_mean(std::string_view given, const std::vector<std::string>& names);

}  // namespace diffattn
