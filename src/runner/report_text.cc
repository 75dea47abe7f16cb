#include "runner/report_text.h"

#include <sstream>

#include "common/strings.h"
#include "common/text_table.h"
#include "runner/report_format.h"
#include "runner/text_padding_mask.h"

namespace diffattn::runner {
namespace {

std::vector<std::string> run_row(const RunReport& report, const RoleReport& role, const BackendRun& run, bool baseline) {
  std::vector<std::string> row = {role.plan.role.role, run.configuration, fmt_backend(run)};
  if (!run.ok()) {
    row.push_back("did not run (below)");
    return row;
  }
  const double base = role.baseline.ok() ? role.baseline.median_ms() : 0;
  row.push_back(fmt_ms(run.median_ms()));
  row.push_back(fmt_share(share_of_step(report, role, run)));
  row.push_back(fmt("%.3g", tflops(role.plan.flops_per_call, run.median_ms())));
  if (run.same_as_baseline) {
    row.insert(row.end(), {"-", "= baseline", "", "", ""});
    return row;
  }
  row.push_back(base > 0 ? fmt("%.2fx", base / run.median_ms()) : "-");
  if (baseline) {
    row.insert(row.end(), {"(reference)", "", "", ""});
    return row;
  }
  const QualityMetrics& q = run.quality;
  row.insert(row.end(), {fmt("%.2e", q.rel_l2), fmt("%.6f", q.cosine), fmt("%.2e", q.max_abs), fmt_psnr(q)});
  return row;
}

// Which profile and backend ran which steps, for every scheduled configuration.
std::string schedule_text(const RunReport& report) {
  TextTable table({"role", "configuration", "profile", "covers", "backend", "sampled steps run"});
  bool any = false;
  for (const RoleReport& role : report.roles) {
    for (const BackendRun& run : role.runs) {
      for (const ScheduleUse& u : run.schedule) {
        any = true;
        table.add_row({role.plan.role.role, run.configuration, u.profile.empty() ? "(base configuration)" : u.profile,
                       u.ranges, u.backend, fmt_steps(u.sampled_steps)});
      }
    }
  }
  return any ? "attention schedule:\n" + table.render() + "\n" : "";
}

}  // namespace

std::string workload_header_text(const WorkloadPlan& plan, const std::string& platform, const RunRequest& request) {
  std::ostringstream o;
  o << "diffattn run: " << plan.model->display_name << " (" << plan.model->name << ") " << plan.height << "x"
    << plan.width << "x" << plan.frames << ", " << plan.video_tokens << " video tokens";
  if (plan.audio_tokens > 0) o << ", " << plan.audio_tokens << " audio tokens";
  o << ", " << plan.steps << " steps, seed " << request.seed << ", " << dtype_name(plan.dtype) << "\n";
  o << "platform: " << platform << "\n";
  if (request.activations_dir.empty())
    o << "activations: generated from seed " << request.seed << " with DiT-like statistics\n";
  else
    o << "activations: " << request.activations_dir << " (real Q/K/V dumps)\n";
  if (plan.prompt_tokens) o << text_mask_summary(plan) << "\n";
  for (const std::string& n : plan.notes) o << "note: " << n << "\n";
  return o.str();
}

std::string report_to_text(const RunReport& report) {
  std::ostringstream o;
  TextTable table({"role", "configuration", "backend (source)", "time/call", "share", "TFLOP/s", "vs base", "relL2",
                    "cosine", "max abs", "PSNR"});
  for (const RoleReport& role : report.roles) {
    table.add_row(run_row(report, role, role.baseline, true));
    for (const BackendRun& run : role.runs) table.add_row(run_row(report, role, run, false));
  }
  o << table.render() << "\n";
  o << schedule_text(report);
  std::ostringstream sparse;
  for (const RoleReport& role : report.roles)
    for (const BackendRun& run : role.runs)
      if (run.density)
        sparse << "sparse: " << role.plan.role.role << " (" << run.configuration << "): " << run.backend
               << " computes " << fmt("%.3f", *run.density) << " of the tile pairs (" << run.density_detail << ")\n";
  if (!sparse.str().empty()) o << sparse.str() << "\n";
  std::vector<std::string> same;
  for (const RoleReport& role : report.roles)
    for (const BackendRun& run : role.runs)
      if (run.same_as_baseline) same.push_back(role.plan.role.role + " (" + run.configuration + ")");
  if (!same.empty())
    o << "note: " << join(same, ", ")
      << ": the baseline's own computation (" << report.roles.front().baseline.backend
      << " with no options), so it ran once and shows no ratio against itself; compare other backends with "
         "--compare (diffattn backends lists those that run here)\n\n";
  std::vector<std::string> failures;
  for (const RoleReport& role : report.roles) {
    std::vector<const BackendRun*> runs = {&role.baseline};
    for (const BackendRun& run : role.runs) runs.push_back(&run);
    for (const BackendRun* run : runs)
      if (!run->ok()) failures.push_back(role.plan.role.role + " / " + run->configuration + ": " + run->error);
  }
  for (const std::string& f : failures) o << "did not run: " << f << "\n";
  if (!failures.empty()) o << "\n";
  if (!report.request.compare.empty()) {
    TextTable verdicts({"role", "verdict", "why"});
    for (const RoleReport& role : report.roles)
      verdicts.add_row({role.plan.role.role,
                        role.verdict.configuration ? role.verdict.backend : "TORCH_SDPA (baseline)", role.verdict.reason});
    o << verdicts.render() << "\n";
  }
  TextTable steps({"configuration", "attention/step", "attention/generation"});
  std::vector<std::string> labels = {"baseline"};
  for (const Configuration& c : report.configurations) labels.push_back(c.label);
  for (const std::string& label : labels) {
    const auto step = report.step_ms(label);
    steps.add_row({label, step ? fmt_ms(*step) : "-", step ? fmt_ms(*step * report.plan.steps) : "-"});
  }
  o << steps.render();
  return o.str();
}

}  // namespace diffattn::runner
