#include "platform/tuning_record.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/input_file.h"

namespace diffattn {
namespace {

using nlohmann::json;

// A record is a few kilobytes; anything far larger is not one.
constexpr std::uint64_t kMaxRecordBytes = 1 << 22;

// The platform facts a tuning depends on.
json platform_identity(const json& platform) {
  json id = json::object();
  for (const char* key : {"kind", "device_name", "compute_capability", "cudnn_version"})
    id[key] = platform.contains(key) ? platform[key] : json(nullptr);
  return id;
}

}  // namespace

std::string tuning_record_path(const std::string& config_path) {
  std::filesystem::path path(config_path);
  if (path.extension() == ".json") return path.replace_extension(".tuning.json").string();
  return config_path + ".tuning.json";
}

std::optional<std::string> tuned_elsewhere_warning(const std::string& config_path, const PlatformInfo& current) {
  const std::string record_path = tuning_record_path(config_path);
  std::error_code ec;
  if (!std::filesystem::exists(record_path, ec)) return std::nullopt;
  Result<std::string> text = read_small_file(record_path, kMaxRecordBytes, "tuning record");
  const json record = text.ok() ? json::parse(*text, nullptr, /*allow_exceptions=*/false) : json();
  if (!record.is_object() || !record.contains("tuned_on") || !record["tuned_on"].is_object())
    return "the tuning record " + record_path + " beside the configuration is unreadable; its measurements may not "
           "hold here (re-run diffattn tune)";
  const json then = platform_identity(record["tuned_on"]);
  const json now = platform_identity(platform_to_json(current));
  if (then == now) return std::nullopt;
  return config_path + " was tuned on " + record.value("description", then.dump()) + ", not on this platform (" +
         current.describe() + "); its choices may not be the fastest here: re-run diffattn tune";
}

}  // namespace diffattn
