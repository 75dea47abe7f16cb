#pragma once
// What `diffattn tune` writes: an AttentionConfig JSON with each role's fastest backend within the
// quality bound, and beside it a tuning record (the measurements and the platform they were taken
// on, read back by platform/tuning_record.h).

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "diffattn/platform.h"
#include "platform/tuning_record.h"
#include "runner/run_report.h"

namespace diffattn::cli {

// {"default": null, "per_role": {role: spec}}: the verdict's spec per role; TORCH_SDPA (the
// baseline) for a role where nothing ran within the bound.
nlohmann::json tuned_config_json(const runner::RunReport& report);

// {"tuned_on": platform, "description", "diffattn_version", "created_utc", "model", "quality_bound",
//  "roles": [{"role", "chosen", "reason", "candidates": [{"configuration", "backend", "median_ms",
//  "rel_l2", "error"}]}]}
nlohmann::json tuning_record_json(const runner::RunReport& report);

}  // namespace diffattn::cli
