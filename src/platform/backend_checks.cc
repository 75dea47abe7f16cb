#include "platform/backend_checks.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/strings.h"

namespace diffattn::platform_checks {
namespace {

DeviceKind device_of(PlatformKind kind) { return kind == PlatformKind::kCuda ? DeviceKind::kCuda : DeviceKind::kCpu; }

bool runs_on(const BackendDescriptor& backend, PlatformKind kind) {
  const auto& devices = backend.caps.devices;
  return std::find(devices.begin(), devices.end(), device_of(kind)) != devices.end();
}

std::string devices_text(const BackendDescriptor& backend) {
  return join(backend.caps.devices, " and ", "no device",
              [](DeviceKind d) { return std::string(d == DeviceKind::kCuda ? "CUDA" : "CPU"); });
}

}  // namespace

std::string kind_name(PlatformKind kind) { return kind == PlatformKind::kCuda ? "CUDA" : "CPU"; }

Status check_runs_on_kind(const BackendDescriptor& backend, const PlatformInfo& info, std::string_view suggestion) {
  if (runs_on(backend, info.kind)) return Status::Ok();
  std::string here = kind_name(info.kind);
  if (info.kind == PlatformKind::kCuda) here += " (" + info.sm_string() + ")";
  return Unsupported(backend.name + " runs on " + devices_text(backend) + " only, but the current platform is " +
                     here + ". Select " + std::string(suggestion) + " instead.");
}

Status check_available(const BackendDescriptor& backend, const PlatformInfo& info, const Registry& registry) {
  if (!backend.unavailable_reason) return Status::Ok();
  std::optional<std::string> reason = backend.unavailable_reason(info);
  if (!reason) return Status::Ok();
  return Unavailable(backend.name + " was explicitly selected but is unavailable on " + info.describe() + ": " +
                     suggest_only_runnable(*reason, registry, info));
}

std::string suggest_only_runnable(const std::string& text, const Registry& registry, const PlatformInfo& info) {
  std::size_t verb = text.find("Select ");
  if (verb == std::string::npos) verb = text.find("select ");
  if (verb == std::string::npos) return text;
  const std::size_t names_begin = verb + 7;
  const std::size_t names_end = text.find(" instead", names_begin);
  if (names_end == std::string::npos) return text;
  std::string names = text.substr(names_begin, names_end - names_begin);
  for (std::size_t at = names.find(" or "); at != std::string::npos; at = names.find(" or ")) names.replace(at, 4, ", ");
  std::vector<std::string> kept;
  for (std::size_t begin = 0; begin <= names.size();) {
    const std::size_t end = std::min(names.find(", ", begin), names.size());
    const std::string name = names.substr(begin, end - begin);
    auto backend = registry.find(name);
    if (!backend.ok()) return text;  // not a plain list of backend names: leave the advice as written
    if (runs_on(**backend, info.kind) && !((*backend)->unavailable_reason && (*backend)->unavailable_reason(info)))
      kept.push_back(name);
    begin = end + 2;
  }
  if (kept.empty()) return text;
  std::string list;
  for (std::size_t i = 0; i < kept.size(); ++i)
    list += (i == 0 ? "" : i + 1 == kept.size() ? " or " : ", ") + kept[i];
  return text.substr(0, names_begin) + list + text.substr(names_end);
}

std::optional<std::string> default_blocker(const Registry& registry, const PlatformInfo& info,
                                           const std::string& name) {
  Result<const BackendDescriptor*> backend = registry.find(name);
  if (!backend.ok()) return "not registered";
  if (!runs_on(**backend, info.kind)) return "runs on " + devices_text(**backend) + " only";
  if ((*backend)->unavailable_reason) {
    if (std::optional<std::string> reason = (*backend)->unavailable_reason(info)) return reason;
  }
  return std::nullopt;
}

}  // namespace diffattn::platform_checks
