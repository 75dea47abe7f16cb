#pragma once
// Runs a planned workload: per role and sample, the TORCH_SDPA baseline and every configuration on
// the same inputs, timed, with the outputs compared against the baseline.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "diffattn/platform.h"
#include "diffattn/selector.h"
#include "runner/run_report.h"

namespace diffattn::runner {

// Called after every attention call: calls done, calls planned, what ran.
using ProgressFn = std::function<void(std::int64_t, std::int64_t, const std::string&)>;

// Resolves every role under every configuration (an explicit backend that cannot run is recorded
// with its reason, not fatal), then runs. Errors are returned only for what stops the whole run.
Result<RunReport> execute_workload(const RunRequest& request, WorkloadPlan plan,
                                   std::shared_ptr<const Platform> platform,
                                   std::vector<Configuration> configurations, const ProgressFn& progress);

// The configuration TORCH_SDPA everywhere: the baseline every figure is compared with.
AttentionConfig baseline_config();

}  // namespace diffattn::runner
