#include "runner/report_html.h"

#include <sstream>

#include "runner/report_format.h"
#include "runner/svg_chart.h"
#include "runner/text_padding_mask.h"

namespace diffattn::runner {
namespace {

constexpr const char* kStyle = R"css(
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #111827; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.meta { color: #4b5563; margin: 2px 0; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border-bottom: 1px solid #e5e7eb; padding: 4px 10px; text-align: right; }
th { background: #f3f4f6; } td.l, th.l { text-align: left; }
tr.fail td { color: #b91c1c; } tr.base td { color: #4b5563; font-style: italic; }
.win { font-weight: bold; color: #047857; } .note { color: #92400e; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; }
)css";

std::string td(const std::string& v, bool left = false) {
  return std::string(left ? "<td class=\"l\">" : "<td>") + html_escape(v) + "</td>";
}

void write_run_row(std::ostringstream& o, const RunReport& report, const RoleReport& role, const BackendRun& run,
                   bool baseline) {
  const bool winner = role.verdict.configuration && *role.verdict.configuration == run.configuration && !baseline;
  o << "<tr class=\"" << (baseline ? "base" : (run.ok() ? "" : "fail")) << "\">" << td(role.plan.role.role, true)
    << "<td class=\"l" << (winner ? " win" : "") << "\">" << html_escape(run.configuration) << "</td>"
    << td(fmt_backend(run), true);
  if (!run.ok()) {
    o << "<td class=\"l\" colspan=\"8\">" << html_escape(run.error) << "</td></tr>\n";
    return;
  }
  const double base = role.baseline.ok() ? role.baseline.median_ms() : 0;
  o << td(fmt_ms(run.median_ms())) << td(fmt_share(share_of_step(report, role, run)))
    << td(fmt("%.3g", tflops(role.plan.flops_per_call, run.median_ms())))
    << td(base > 0 && !run.same_as_baseline ? fmt("%.2fx", base / run.median_ms()) : "-");
  if (run.same_as_baseline) {
    o << "<td colspan=\"4\" class=\"l\">the baseline's own run</td></tr>\n";
    return;
  }
  if (baseline) {
    o << "<td colspan=\"4\" class=\"l\">reference</td></tr>\n";
    return;
  }
  const QualityMetrics& q = run.quality;
  o << td(fmt("%.2e", q.rel_l2)) << td(fmt("%.6f", q.cosine)) << td(fmt("%.2e", q.max_abs)) << td(fmt_psnr(q))
    << "</tr>\n";
}

BarChart time_chart(const RunReport& report) {
  BarChart c;
  c.title = "Time per attention call";
  c.y_label = "milliseconds";
  c.log_scale = true;
  c.series.push_back("TORCH_SDPA baseline");
  for (const Configuration& cfg : report.configurations) c.series.push_back(cfg.label);
  c.values.resize(c.series.size());
  for (const RoleReport& role : report.roles) {
    c.groups.push_back(role.plan.role.role);
    auto time = [](const BackendRun& r) -> std::optional<double> {
      if (!r.ok() || r.times_ms.empty()) return std::nullopt;
      return r.median_ms();
    };
    c.values[0].push_back(time(role.baseline));
    for (std::size_t i = 0; i < role.runs.size(); ++i) c.values[i + 1].push_back(time(role.runs[i]));
  }
  return c;
}

BarChart error_chart(const RunReport& report) {
  BarChart c;
  c.title = "Error against the TORCH_SDPA baseline (worst call)";
  c.y_label = "relative L2 error";
  c.log_scale = true;
  c.reference = report.request.quality_bound;
  c.reference_label = "quality bound " + fmt("%.1e", report.request.quality_bound);
  c.first_color = 1;  // the time chart's first colour is the baseline's
  for (const Configuration& cfg : report.configurations) c.series.push_back(cfg.label);
  c.values.resize(c.series.size());
  for (const RoleReport& role : report.roles) {
    c.groups.push_back(role.plan.role.role);
    for (std::size_t i = 0; i < role.runs.size(); ++i) {
      const BackendRun& r = role.runs[i];
      const bool has = r.ok() && r.quality.elements > 0;
      c.values[i].push_back(has ? std::optional<double>(r.quality.rel_l2) : std::nullopt);
    }
  }
  return c;
}

void write_summary(std::ostringstream& o, const RunReport& report) {
  const WorkloadPlan& p = report.plan;
  o << "<h1>diffattn run: " << html_escape(p.model->display_name) << "</h1>\n";
  o << "<p class=\"meta\">" << p.height << "x" << p.width << ", " << p.frames << " frame(s), " << p.video_tokens
    << " video tokens";
  if (p.audio_tokens > 0) o << ", " << p.audio_tokens << " audio tokens";
  o << ", " << p.model->text_tokens << " text tokens; " << p.steps << " steps (sampled: " << p.sampled_steps.size()
    << "); batch " << p.batch << "; " << html_escape(std::string(dtype_name(p.dtype))) << "; seed "
    << report.request.seed << "</p>\n";
  if (p.prompt_tokens) o << "<p class=\"meta\">" << html_escape(text_mask_summary(p)) << "</p>\n";
  o << "<p class=\"meta\">Platform: " << html_escape(report.platform.describe()) << " &middot; "
    << html_escape(report.created_utc) << " &middot; " << fmt("%.1f", report.wall_seconds) << " s &middot; activations: "
    << html_escape(report.request.activations_dir.empty() ? "generated from the seed" : report.request.activations_dir)
    << " &middot; " << p.warmup << " warm-up + " << p.repeats << " timed calls per sample</p>\n";
  for (const std::string& n : p.notes) o << "<p class=\"note\">" << html_escape(n) << "</p>\n";
}

void write_verdicts(std::ostringstream& o, const RunReport& report) {
  o << "<h2>Verdict per role</h2>\n<table><tr><th class=\"l\">role</th><th class=\"l\">choice</th>"
       "<th class=\"l\">why</th></tr>\n";
  for (const RoleReport& role : report.roles)
    o << "<tr>" << td(role.plan.role.role, true)
      << "<td class=\"l win\">" << html_escape(role.verdict.configuration ? role.verdict.backend : "TORCH_SDPA (baseline)")
      << "</td>" << td(role.verdict.reason, true) << "</tr>\n";
  o << "</table>\n";
}

void write_results(std::ostringstream& o, const RunReport& report) {
  o << "<h2>Results</h2>\n<table><tr><th class=\"l\">role</th><th class=\"l\">configuration</th>"
       "<th class=\"l\">backend (source)</th><th>time/call</th><th>share of step</th><th>TFLOP/s</th>"
       "<th>vs baseline</th><th>relL2</th><th>cosine</th><th>max abs</th><th>PSNR</th></tr>\n";
  for (const RoleReport& role : report.roles) {
    write_run_row(o, report, role, role.baseline, true);
    for (const BackendRun& run : role.runs) write_run_row(o, report, role, run, false);
  }
  o << "</table>\n";
  o << "<table><tr><th class=\"l\">role</th><th>heads</th><th>kv heads</th><th>head size</th><th>Sq</th>"
       "<th>Skv</th><th>layers</th><th class=\"l\">sampled layers</th></tr>\n";
  for (const RoleReport& role : report.roles) {
    std::string layers;
    for (int l : role.plan.layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    const ModelRole& r = role.plan.role;
    o << "<tr>" << td(r.role, true) << td(std::to_string(r.num_heads)) << td(std::to_string(r.num_kv_heads))
      << td(std::to_string(r.head_size)) << td(std::to_string(role.plan.seqlen_q))
      << td(std::to_string(role.plan.seqlen_kv)) << td(std::to_string(r.layers)) << td(layers, true) << "</tr>\n";
  }
  o << "</table>\n";
}

// Which profile and backend ran which steps, for every scheduled configuration.
void write_schedule(std::ostringstream& o, const RunReport& report) {
  std::ostringstream rows;
  for (const RoleReport& role : report.roles)
    for (const BackendRun& run : role.runs)
      for (const ScheduleUse& u : run.schedule)
        rows << "<tr>" << td(role.plan.role.role, true) << td(run.configuration, true)
             << td(u.profile.empty() ? "(base configuration)" : u.profile, true) << td(u.ranges, true)
             << td(u.backend, true) << td(fmt_steps(u.sampled_steps), true) << "</tr>\n";
  if (rows.str().empty()) return;
  o << "<h2>Attention schedule</h2>\n<table><tr><th class=\"l\">role</th><th class=\"l\">configuration</th>"
       "<th class=\"l\">profile</th><th class=\"l\">covers</th><th class=\"l\">backend</th>"
       "<th class=\"l\">sampled steps run</th></tr>\n"
    << rows.str() << "</table>\n";
}

// The share of tile pairs each sparse video backend computes, per role and configuration.
void write_sparse(std::ostringstream& o, const RunReport& report) {
  std::ostringstream rows;
  for (const RoleReport& role : report.roles)
    for (const BackendRun& run : role.runs)
      if (run.density)
        rows << "<tr>" << td(role.plan.role.role, true) << td(run.configuration, true) << td(run.backend, true)
             << td(fmt("%.3f", *run.density)) << td(run.density_detail, true) << "</tr>\n";
  if (rows.str().empty()) return;
  o << "<h2>Sparse attention</h2>\n<table><tr><th class=\"l\">role</th><th class=\"l\">configuration</th>"
       "<th class=\"l\">backend</th><th>tile pairs computed</th><th class=\"l\">how</th></tr>\n"
    << rows.str() << "</table>\n";
}

void write_step_summary(std::ostringstream& o, const RunReport& report) {
  o << "<h2>Attention per denoising step</h2>\n<table><tr><th class=\"l\">configuration</th>"
       "<th>attention per step</th><th>attention per generation</th></tr>\n";
  std::vector<std::string> labels = {"baseline"};
  for (const Configuration& c : report.configurations) labels.push_back(c.label);
  for (const std::string& label : labels) {
    const auto step = report.step_ms(label);
    o << "<tr>" << td(label, true) << td(step ? fmt_ms(*step) : "-")
      << td(step ? fmt("%.2f s", *step * report.plan.steps / 1000.0) : "-") << "</tr>\n";
  }
  o << "</table>\n<p class=\"meta\">Per-step figures multiply each role's median time per call by its layer count; "
       "they cover attention only, not the rest of the transformer.</p>\n";
}

}  // namespace

std::string report_to_html(const RunReport& report) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>diffattn run: "
    << html_escape(report.plan.model->name) << "</title><style>" << kStyle << "</style></head><body>\n";
  write_summary(o, report);
  if (!report.request.compare.empty()) write_verdicts(o, report);
  o << "<h2>Charts</h2>\n<div class=\"charts\">\n"
    << render_bar_chart(time_chart(report));
  if (!report.configurations.empty()) o << render_bar_chart(error_chart(report));
  o << "</div>\n";
  write_results(o, report);
  write_schedule(o, report);
  write_sparse(o, report);
  write_step_summary(o, report);
  o << "<p class=\"meta\">Every figure is also in report.json next to this file.</p>\n</body></html>\n";
  return o.str();
}

}  // namespace diffattn::runner
