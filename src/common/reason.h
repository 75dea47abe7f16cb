#pragma once
// The one shape of a check's answer: a named predicate returns why something cannot be done, as
// one clause without a trailing period ("head size 80 is not compiled (compiled: 64, 128)"), or
// nothing when it can. Callers collect reasons and join them with reasons_text.

#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"

namespace diffattn {

using Reason = std::optional<std::string>;

// Every collected reason in one message: "first; second".
inline std::string reasons_text(const std::vector<std::string>& reasons) { return join(reasons, "; "); }

}  // namespace diffattn
