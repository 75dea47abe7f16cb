#include "runner/report_json.h"

#include <algorithm>

#include "diffattn/selector.h"
#include "runner/text_padding_mask.h"

namespace diffattn::runner {
namespace {

using nlohmann::json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json run_to_json(const RunReport& report, const RoleReport& role, const BackendRun& run) {
  json j = {{"configuration", run.configuration},
            {"backend", run.backend.empty() ? json(nullptr) : json(run.backend)},
            {"source", run.source.empty() ? json(nullptr) : json(run.source)},
            {"resolution", run.resolution},
            {"status", run.ok() ? "ok" : "failed"}};
  if (!run.ok()) j["error"] = {{"code", run.error_code}, {"message", run.error}};
  if (run.ok() && !run.times_ms.empty()) {
    const double base = role.baseline.ok() ? role.baseline.median_ms() : 0;
    j["time_ms"] = {{"median", run.median_ms()}, {"min", run.min_ms()}, {"max", run.max_ms()}, {"samples", run.times_ms}};
    j["tflops"] = tflops(role.plan.flops_per_call, run.median_ms());
    j["share_of_step"] = optional_number(share_of_step(report, role, run));
    j["speedup_vs_baseline"] = base > 0 && !run.same_as_baseline ? json(base / run.median_ms()) : json(nullptr);
  }
  if (run.configuration != "baseline") j["same_as_baseline"] = run.same_as_baseline;
  if (run.density) j["sparse"] = {{"density", *run.density}, {"detail", run.density_detail}};
  if (!run.schedule.empty()) {
    json uses = json::array();
    for (const ScheduleUse& u : run.schedule)
      uses.push_back({{"profile", u.profile.empty() ? json(nullptr) : json(u.profile)},
                      {"ranges", u.ranges},
                      {"backend", u.backend},
                      {"source_detail", u.source_detail},
                      {"sampled_steps", u.sampled_steps}});
    j["schedule"] = std::move(uses);
  }
  if (run.ok() && run.configuration != "baseline" && run.quality.elements > 0) {
    j["quality"] = quality_to_json(run.quality);
    j["within_bound"] = within_bound(run.quality, report.request.quality_bound);
  }
  return j;
}

json role_to_json(const RunReport& report, const RoleReport& role) {
  const ModelRole& r = role.plan.role;
  json runs = json::array();
  for (const BackendRun& run : role.runs) runs.push_back(run_to_json(report, role, run));
  return {{"role", r.role},
          {"category", r.category ? json(*r.category) : json(nullptr)},
          {"heads", r.num_heads},
          {"kv_heads", r.num_kv_heads},
          {"head_size", r.head_size},
          {"seqlen_q", role.plan.seqlen_q},
          {"seqlen_kv", role.plan.seqlen_kv},
          {"query_tokens", r.query_tokens},
          {"key_tokens", r.key_tokens},
          {"layers", r.layers},
          {"layers_sampled", role.plan.layers},
          {"flops_per_call", role.plan.flops_per_call},
          {"text_keys_masked", role.plan.text_keys_masked},
          {"activations", role.activations},
          {"baseline", run_to_json(report, role, role.baseline)},
          {"results", runs},
          {"verdict",
           {{"configuration", role.verdict.configuration ? json(*role.verdict.configuration) : json(nullptr)},
            {"backend", role.verdict.backend.empty() ? json(nullptr) : json(role.verdict.backend)},
            {"reason", role.verdict.reason}}}};
}

json step_summary(const RunReport& report) {
  json rows = json::array();
  std::vector<std::string> labels = {"baseline"};
  for (const Configuration& c : report.configurations) labels.push_back(c.label);
  for (const std::string& label : labels) {
    const auto step = report.step_ms(label);
    rows.push_back({{"configuration", label},
                    {"attention_ms_per_step", optional_number(step)},
                    {"attention_s_per_generation",
                     step ? json(*step * report.plan.steps / 1000.0) : json(nullptr)}});
  }
  return rows;
}

}  // namespace

json report_to_json(const RunReport& report) {
  const WorkloadPlan& plan = report.plan;
  json configurations = json::array();
  for (const Configuration& c : report.configurations) {
    configurations.push_back({{"label", c.label}, {"config", config_to_json(c.config)}});
    if (c.schedule) configurations.back()["schedule"] = schedule_to_json(*c.schedule);
  }
  json roles = json::array();
  for (const RoleReport& role : report.roles) roles.push_back(role_to_json(report, role));
  return {{"tool", "diffattn run"},
          {"created_utc", report.created_utc},
          {"wall_seconds", report.wall_seconds},
          {"platform", platform_to_json(report.platform)},
          {"platform_description", report.platform.describe()},
          {"workload",
           {{"model", plan.model->name},
            {"display_name", plan.model->display_name},
            {"model_source", plan.model->source},
            {"height", plan.height},
            {"width", plan.width},
            {"frames", plan.frames},
            {"num_inference_steps", plan.steps},
            {"steps_sampled", plan.sampled_steps},
            {"seed", report.request.seed},
            {"batch", plan.batch},
            {"dtype", std::string(dtype_name(plan.dtype))},
            {"video_tokens", plan.video_tokens},
            {"audio_tokens", plan.audio_tokens},
            {"text_tokens", plan.model->text_tokens},
            {"prompt_tokens", plan.prompt_tokens ? json(*plan.prompt_tokens) : json(nullptr)},
            {"text_keys_masked", std::any_of(plan.roles.begin(), plan.roles.end(),
                                             [](const RolePlan& r) { return r.text_keys_masked; })},
            {"text_mask", plan.prompt_tokens ? json(text_mask_summary(plan)) : json(nullptr)},
            {"warmup_calls", plan.warmup},
            {"timed_calls", plan.repeats},
            {"on_device", plan.on_device},
            {"activations", report.request.activations_dir.empty() ? "generated" : report.request.activations_dir},
            {"quality_bound_rel_l2", report.request.quality_bound},
            {"notes", plan.notes}}},
          {"baseline", "TORCH_SDPA on the same inputs"},
          {"configurations", configurations},
          {"roles", roles},
          {"step_summary", step_summary(report)}};
}

}  // namespace diffattn::runner
