#pragma once
// The terminal view of a run: resolutions before it starts, results, verdicts and step totals after.

#include <string>

#include "runner/run_report.h"

namespace diffattn::runner {

std::string workload_header_text(const WorkloadPlan& plan, const std::string& platform, const RunRequest& request);
std::string report_to_text(const RunReport& report);

}  // namespace diffattn::runner
