#include "runner/run_report.h"

#include <algorithm>
#include <cstdio>

namespace diffattn::runner {
namespace {

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

const BackendRun* run_for(const RoleReport& role, const std::string& configuration) {
  if (configuration == "baseline") return &role.baseline;
  for (const BackendRun& r : role.runs)
    if (r.configuration == configuration) return &r;
  return nullptr;
}

}  // namespace

double BackendRun::median_ms() const {
  if (times_ms.empty()) return 0;
  std::vector<double> t = times_ms;
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

double BackendRun::min_ms() const {
  return times_ms.empty() ? 0 : *std::min_element(times_ms.begin(), times_ms.end());
}

double BackendRun::max_ms() const {
  return times_ms.empty() ? 0 : *std::max_element(times_ms.begin(), times_ms.end());
}

std::optional<double> RunReport::step_ms(const std::string& configuration) const {
  double total = 0;
  for (const RoleReport& role : roles) {
    const BackendRun* run = run_for(role, configuration);
    if (!run || !run->ok() || run->times_ms.empty()) return std::nullopt;
    total += run->median_ms() * role.plan.role.layers;
  }
  return total;
}

bool RunReport::all_ok() const {
  for (const RoleReport& role : roles) {
    if (!role.baseline.ok()) return false;
    for (const BackendRun& r : role.runs)
      if (!r.ok()) return false;
  }
  return true;
}

double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; }

std::optional<double> share_of_step(const RunReport& report, const RoleReport& role, const BackendRun& run) {
  const auto step = report.step_ms(run.configuration);
  if (!step || *step <= 0 || !run.ok()) return std::nullopt;
  return run.median_ms() * role.plan.role.layers / *step;
}

Verdict choose_verdict(const RoleReport& role, double bound) {
  Verdict v;
  const BackendRun* best = nullptr;
  std::vector<std::string> excluded;
  for (const BackendRun& r : role.runs) {
    if (!r.ok()) {
      excluded.push_back(r.configuration + " (did not run)");
      continue;
    }
    if (!within_bound(r.quality, bound)) {
      excluded.push_back(r.configuration + " (relL2 " + format("%.2e", r.quality.rel_l2) + ")");
      continue;
    }
    if (!best || r.median_ms() < best->median_ms()) best = &r;
  }
  std::string excluded_text;
  for (const std::string& e : excluded) excluded_text += (excluded_text.empty() ? "" : ", ") + e;
  if (!best) {
    v.reason = "no configuration ran within relL2 <= " + format("%.1e", bound) +
               (excluded_text.empty() ? "" : ": " + excluded_text) + "; keep the TORCH_SDPA baseline";
    return v;
  }
  v.configuration = best->configuration;
  v.backend = best->backend;
  const double base = role.baseline.median_ms();
  v.reason = "fastest within relL2 <= " + format("%.1e", bound) + ": " + format("%.3g", best->median_ms()) +
             " ms per call, " + format("%.2f", base / best->median_ms()) + "x the TORCH_SDPA baseline, relL2 " +
             format("%.2e", best->quality.rel_l2);
  if (!excluded_text.empty()) v.reason += "; excluded: " + excluded_text;
  return v;
}

}  // namespace diffattn::runner
