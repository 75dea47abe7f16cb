#pragma once
// --diffusion-attention-config.<dotted.path> VALUE flags, merged into the nested JSON that one
// --diffusion-attention-config object would give.

#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "diffattn/status.h"

namespace diffattn::config_detail {

// A flag value as JSON when it parses as JSON (numbers, booleans, null, lists, objects, quoted
// strings), otherwise the text itself as a string: FLASH_ATTN -> "FLASH_ATTN", 0.7 -> 0.7.
Result<nlohmann::json> typed_flag_value(std::string_view text, std::string_view flag);

// Sets each path in `root` (an object), in order. A later flag replaces an earlier value at the
// same path; objects merge key by key; a path through a value, or a value over keys, is an error.
// `flag_prefix` names the flags in messages ("--diffusion-attention-schedule." for the schedule).
Status merge_dotted_flags(nlohmann::json& root, std::span<const std::pair<std::string, std::string>> flags,
                          std::string_view flag_prefix = "--diffusion-attention-config.");

}  // namespace diffattn::config_detail
