#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "diffattn/platform.h"

namespace diffattn {
namespace {

Result<PlatformInfo> load_platform_file(std::string_view path) {
  std::ifstream file{std::string(path)};
  if (!file) {
    return InvalidConfig("--platform '" + std::string(path) +
                         "' is neither 'cpu', 'cuda' nor a readable JSON platform description file.");
  }
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::json value = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return InvalidConfig("platform description '" + std::string(path) + "' is not valid JSON.");
  }
  Result<PlatformInfo> info = platform_from_json(value);
  if (!info.ok()) return InvalidConfig(std::string(path) + ": " + info.status().message());
  info->origin = std::filesystem::path(std::string(path)).filename().string();
  return info;
}

// "cpu" and "cuda" in any case, like backend names; anything else is a file path, case kept.
bool names_kind(std::string_view spec, std::string_view kind) {
  return spec.size() == kind.size() && std::equal(spec.begin(), spec.end(), kind.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

}  // namespace

Result<PlatformInfo> load_platform(std::string_view spec) {
  if (names_kind(spec, "cpu")) return probe_cpu_platform();
  if (names_kind(spec, "cuda")) return probe_cuda_platform(0);
  if (spec.empty()) {
    Result<PlatformInfo> cuda = probe_cuda_platform(0);
    if (cuda.ok()) return cuda;
    return probe_cpu_platform();
  }
  return load_platform_file(spec);
}

}  // namespace diffattn
