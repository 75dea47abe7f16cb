#pragma once
// Layer index selectors ("0-3,38"): parsing lives in config.h (parse_index_selector); this is
// the inverse used when a selector was given as a list or as indices in code.

#include <cstdint>
#include <set>
#include <string>

namespace diffattn::config_detail {

// Largest layer index a selector may name; it bounds the work a range like "0-99999999999" asks for.
inline constexpr std::int64_t kMaxLayerIndex = 65535;

// {0, 1, 2, 38} -> "0,1,2,38".
std::string format_index_selector(const std::set<std::int64_t>& indices);

}  // namespace diffattn::config_detail
