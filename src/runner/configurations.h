#pragma once
// The configurations a run compares: the configured one alone, or one per --compare entry.

#include <string>
#include <vector>

#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "runner/run_report.h"

namespace diffattn::runner {

// Without `compare`: the user's configuration, labelled "configured" (or "platform default" when
// empty). With it: the user's configuration with default.backend set to each entry in turn ("auto":
// the platform default; "all": every registered backend that can run on `platform`). per_role
// entries of the user's configuration stay in every one of them, and so does `schedule` (the label
// without --compare is then "scheduled").
Result<std::vector<Configuration>> make_configurations(const AttentionConfig& user, const std::vector<std::string>& compare,
                                                       const PlatformInfo& platform, const Registry& registry,
                                                       const std::optional<AttentionSchedule>& schedule = std::nullopt);

}  // namespace diffattn::runner
