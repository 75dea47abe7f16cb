#pragma once
// Number formats shared by the terminal table and the HTML report.

#include <optional>
#include <string>

#include "runner/quality_metrics.h"

namespace diffattn::runner {

std::string fmt(const char* format, double value);
std::string fmt_ms(double ms);                    // "812.0 us", "4.55 ms", "23.6 s"
std::string fmt_share(std::optional<double> share);  // "63.2 %"
std::string fmt_psnr(const QualityMetrics& m);    // "54.1 dB", "inf" when identical

}  // namespace diffattn::runner
