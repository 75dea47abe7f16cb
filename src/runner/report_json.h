#pragma once
// The JSON document of a run: every figure the terminal table and the HTML report show.

#include <nlohmann/json.hpp>

#include "runner/run_report.h"

namespace diffattn::runner {

nlohmann::json report_to_json(const RunReport& report);

}  // namespace diffattn::runner
