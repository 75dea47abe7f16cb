#include "platform/cudnn_version.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

namespace diffattn {

std::string cudnn_version_string(int version) {
  if (version <= 0) return "none";
  const int major_unit = version >= 90000 ? 10000 : 1000;
  const int major = version / major_unit;
  const int minor = (version % major_unit) / 100;
  const int patch = version % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Result<int> parse_cudnn_version(std::string_view text) {
  std::vector<int> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t dot = std::min(text.find('.', start), text.size());
    const std::string_view piece = text.substr(start, dot - start);
    int value = -1;
    const auto [end, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), value);
    if (piece.empty() || ec != std::errc() || end != piece.data() + piece.size() || value < 0 || value > 99) {
      parts.clear();
      break;
    }
    parts.push_back(value);
    start = dot + 1;
  }
  // cuDNN 8 encodes MAJOR*1000 + MINOR*100 + PATCH, so its minor has one digit.
  if (parts.size() < 2 || parts.size() > 3 || parts[0] < 8 || (parts[0] == 8 && parts[1] > 9)) {
    return InvalidConfig("cudnn_version '" + std::string(text) +
                         "' is not a cuDNN version: write MAJOR.MINOR[.PATCH] with MAJOR >= 8, e.g. \"9.5.0\", "
                         "or the integer cudnnGetVersion reports, e.g. 90500.");
  }
  const int patch = parts.size() == 3 ? parts[2] : 0;
  const int major_unit = parts[0] >= 9 ? 10000 : 1000;
  return parts[0] * major_unit + parts[1] * 100 + patch;
}

}  // namespace diffattn
