#include "runner/report_format.h"

#include <algorithm>
#include <cstdio>

#include "common/strings.h"

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

std::string fmt_backend(const BackendRun& run) {
  if (run.backend.empty()) return "-";
  if (run.schedule.empty()) return run.backend + " (" + run.source + ")";
  std::vector<std::string> backends;
  for (const ScheduleUse& u : run.schedule)
    if (std::find(backends.begin(), backends.end(), u.backend) == backends.end()) backends.push_back(u.backend);
  return join(backends, " + ") + " (schedule)";
}

std::string fmt_steps(const std::vector<int>& steps) {
  std::vector<std::string> items;
  for (int s : steps) items.push_back(std::to_string(s));
  return items.empty() ? "none sampled" : join(items, ", ");
}

}  // namespace diffattn::runner
