#pragma once
// A self-contained HTML report of a run: summary, verdicts, per-role tables and inline SVG charts
// of time and error per role and backend.

#include <string>

#include "runner/run_report.h"

namespace diffattn::runner {

std::string report_to_html(const RunReport& report);

}  // namespace diffattn::runner
