#include "runner/report_format.h"

#include <cstdio>

namespace diffattn::runner {

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// Three significant digits in the unit that keeps them plain: 512.0 us, 23.6 ms, 23.6 s, 2360 s.
std::string fmt_ms(double ms) {
  if (ms < 0.9995) return fmt("%.1f us", ms * 1000.0);
  if (ms < 999.5) return fmt("%.3g ms", ms);
  if (ms < 99950.0) return fmt("%.3g s", ms / 1000.0);
  return fmt("%.0f s", ms / 1000.0);
}

std::string fmt_share(std::optional<double> share) { return share ? fmt("%.1f %%", *share * 100.0) : "-"; }

std::string fmt_psnr(const QualityMetrics& m) { return m.psnr_db ? fmt("%.1f dB", *m.psnr_db) : "inf"; }

}  // namespace diffattn::runner
