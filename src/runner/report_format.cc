#include "runner/report_format.h"

#include <cstdio>

namespace diffattn::runner {

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string fmt_ms(double ms) {
  if (ms < 1.0) return fmt("%.1f us", ms * 1000.0);
  return fmt("%.3g ms", ms);
}

std::string fmt_share(std::optional<double> share) { return share ? fmt("%.1f %%", *share * 100.0) : "-"; }

std::string fmt_psnr(const QualityMetrics& m) { return m.psnr_db ? fmt("%.1f dB", *m.psnr_db) : "inf"; }

}  // namespace diffattn::runner
