#pragma once
// Checks both platforms apply to a backend: platform kind and availability.
// Each returns a Status whose message names the backend, what failed here, and what to select.

#include <optional>
#include <string>
#include <string_view>

#include "diffattn/platform.h"
#include "diffattn/registry.h"

namespace diffattn::platform_checks {

std::string kind_name(PlatformKind kind);  // "CPU" / "CUDA"

// kUnsupported when the backend has no kernels for this kind of platform at all.
Status check_runs_on_kind(const BackendDescriptor& backend, const PlatformInfo& info, std::string_view suggestion);
// kUnavailable with the descriptor's reason (kernels or a library missing from this build).
Status check_available(const BackendDescriptor& backend, const PlatformInfo& info, const Registry& registry);

// `text` with its "Select A, B or C instead" advice cut to the backends that can run on `info`
// (advice written once per backend cannot know the platform); other text is unchanged.
std::string suggest_only_runnable(const std::string& text, const Registry& registry, const PlatformInfo& info);

// Why `name` cannot be a default here (unregistered, wrong kind, unavailable), or nullopt.
std::optional<std::string> default_blocker(const Registry& registry, const PlatformInfo& info,
                                           const std::string& name);

}  // namespace diffattn::platform_checks
