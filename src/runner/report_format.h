#pragma once
// Number formats shared by the terminal table and the HTML report.

#include <optional>
#include <string>

#include "runner/quality_metrics.h"
#include "runner/run_report.h"

namespace diffattn::runner {

std::string fmt(const char* format, double value);
std::string fmt_ms(double ms);                    // "812.0 us", "4.55 ms", "23.6 s"
std::string fmt_share(std::optional<double> share);  // "63.2 %"
std::string fmt_psnr(const QualityMetrics& m);    // "54.1 dB", "inf" when identical
// "FLASH_ATTN (default)"; a scheduled run names every backend its steps ran: "TORCH_SDPA + SAGE_ATTN (schedule)".
std::string fmt_backend(const BackendRun& run);
std::string fmt_steps(const std::vector<int>& steps);  // "0, 3, 5", or "none sampled"

}  // namespace diffattn::runner
