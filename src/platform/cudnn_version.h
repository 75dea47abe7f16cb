#pragma once
// cuDNN versions as cudnnGetVersion encodes them: 9.x.y -> 90000 + 100 * x + y (cuDNN 8: 8000 + 100 * x + y).

#include <string>
#include <string_view>

#include "diffattn/status.h"

namespace diffattn {

std::string cudnn_version_string(int version);           // 90500 -> "9.5.0"; 0 -> "none"
Result<int> parse_cudnn_version(std::string_view text);  // "9.5.0" / "9.5" -> 90500

}  // namespace diffattn
