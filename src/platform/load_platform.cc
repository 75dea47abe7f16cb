#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

#include "common/input_file.h"
#include "common/json_duplicates.h"
#include "common/name_hints.h"
#include "diffattn/platform.h"

namespace diffattn {
namespace {

// Platform descriptions are a few hundred bytes; anything far larger is not one.
constexpr std::uint64_t kMaxPlatformFileBytes = 1 << 20;

Result<PlatformInfo> load_platform_file(std::string_view path) {
  std::error_code ec;
  if (!std::filesystem::exists(std::string(path), ec)) {
    return InvalidConfig("--platform '" + std::string(path) +
                         "' is neither 'cpu', 'cuda' nor a readable JSON platform description file.");
  }
  Result<std::string> text = read_small_file(std::string(path), kMaxPlatformFileBytes, "platform description");
  if (!text.ok()) return InvalidConfig("--platform " + text.status().message());
  std::string duplicate;
  const nlohmann::json value = parse_json_noting_duplicates(*text, duplicate, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return InvalidConfig("platform description '" + std::string(path) + "' is not valid JSON.");
  }
  if (!duplicate.empty())
    return InvalidConfig("platform description '" + std::string(path) + "' has the key '" + bounded_echo(duplicate) +
                         "' twice; keep one.");
  Result<PlatformInfo> info = platform_from_json(value);
  if (!info.ok()) return InvalidConfig(std::string(path) + ": " + info.status().message());
  info->origin = std::filesystem::path(std::string(path)).filename().string();
  return info;
}

// A description given inline (the text itself rather than a file that holds it).
Result<PlatformInfo> load_platform_text(std::string_view text) {
  std::string duplicate;
  const nlohmann::json value = parse_json_noting_duplicates(text, duplicate, /*allow_exceptions=*/false);
  if (value.is_discarded()) return InvalidConfig("the platform description given inline is not valid JSON.");
  if (!duplicate.empty())
    return InvalidConfig("the platform description given inline has the key '" + bounded_echo(duplicate) +
                         "' twice; keep one.");
  Result<PlatformInfo> info = platform_from_json(value);
  if (!info.ok()) return InvalidConfig("platform description: " + info.status().message());
  info->origin = "description";
  return info;
}

bool is_inline_description(std::string_view spec) { return !spec.empty() && spec.front() == '{'; }

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
  if (is_inline_description(spec)) return load_platform_text(spec);
  return load_platform_file(spec);
}

}  // namespace diffattn
