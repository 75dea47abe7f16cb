#include "platform/backend_checks.h"

#include <algorithm>

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

Status check_available(const BackendDescriptor& backend, const PlatformInfo& info) {
  if (!backend.unavailable_reason) return Status::Ok();
  std::optional<std::string> reason = backend.unavailable_reason(info);
  if (!reason) return Status::Ok();
  return Unavailable(backend.name + " was explicitly selected but is unavailable on " + info.describe() + ": " +
                     *reason);
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
