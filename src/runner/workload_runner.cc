#include "runner/workload_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/log.h"
#include "kernels/sparse/sparse_density.h"
#include "runner/activation_source.h"
#include "runner/device_buffers.h"
#include "runner/text_padding_mask.h"

namespace diffattn::runner {
namespace {

// One resolved layer per configuration of a role, or why it could not be built.
struct Candidate {
  BackendRun run;
  std::optional<Attention> layer;
};

AttentionLayerDesc layer_desc(const WorkloadPlan& plan, const RolePlan& role_plan) {
  const ModelRole& role = role_plan.role;
  AttentionLayerDesc d;
  d.num_heads = role.num_heads;
  d.num_kv_heads = role.num_kv_heads;
  d.head_size = role.head_size;
  d.causal = role.causal;
  d.role = role.role;
  d.category = role.category;
  d.traits = layer_traits(plan, role_plan);
  return d;
}

// The startup record of a scheduled layer: which profile and backend run which steps.
std::vector<ScheduleUse> schedule_uses(const Attention& layer, const AttentionSchedule& schedule) {
  std::vector<ScheduleUse> uses;
  const std::string base_ranges = base_ranges_text(schedule);
  if (!base_ranges.empty())
    uses.push_back({"", base_ranges, layer.resolution().backend, layer.resolution().source_detail, {}});
  for (const Resolution& r : layer.profile_resolutions())
    uses.push_back({*r.profile, profile_ranges_text(schedule, *r.profile), r.backend, r.source_detail, {}});
  return uses;
}

std::string schedule_log_line(const std::string& label, const std::string& role, const std::vector<ScheduleUse>& uses) {
  std::string line = "Attention schedule of '" + label + "' for role='" + role + "':";
  for (std::size_t i = 0; i < uses.size(); ++i) {
    const ScheduleUse& u = uses[i];
    line += (i == 0 ? " " : "; ") + u.ranges + " " +
            (u.profile.empty() ? "base configuration" : "profile '" + u.profile + "'") + " -> " + u.backend;
  }
  return line;
}

Candidate resolve_candidate(const std::string& label, const AttentionConfig& config, const AttentionLayerDesc& desc,
                            Selector& selector, const AttentionSchedule* schedule = nullptr) {
  Candidate c;
  c.run.configuration = label;
  auto layer = Attention::Create(desc, config, schedule, selector);
  if (!layer.ok()) {
    c.run.error = layer.status().message();
    c.run.error_code = std::string(error_code_name(layer.status().code()));
    c.run.resolution = nullptr;
    return c;
  }
  const Resolution& res = layer->resolution();
  c.run.backend = res.backend;
  c.run.source = std::string(source_name(res.source));
  c.run.resolution = resolution_to_json(res);
  if (schedule) {
    c.run.schedule = schedule_uses(*layer, *schedule);
    log_info(schedule_log_line(label, desc.role, c.run.schedule));
  }
  c.layer.emplace(std::move(layer).value());
  return c;
}

// The denoising step the runner's calls carry. Its sigma is the unshifted flow-matching noise level
// of step i of N, 1 - i/N: the runner has no sampler, so sigma windows are exercised on that curve.
DenoisingStep runner_step(const WorkloadPlan& plan, const ActivationSample& sample) {
  DenoisingStep step;
  step.index = sample.step;
  step.num_steps = plan.steps;
  step.sigma = 1.0 - static_cast<double>(sample.step) / static_cast<double>(plan.steps);
  step.layer = sample.layer;
  return step;
}

// Records which part of the schedule a sampled step ran under.
void note_scheduled_step(Candidate& c, const DenoisingStep& step) {
  if (c.run.schedule.empty()) return;
  auto resolution = c.layer->resolution_for(step);
  if (!resolution.ok()) return;
  const std::string profile = (*resolution)->profile.value_or("");
  for (ScheduleUse& use : c.run.schedule) {
    if (use.profile != profile) continue;
    std::vector<int>& steps = use.sampled_steps;  // every layer samples the same steps: keep each once, in order
    const int index = static_cast<int>(step.index);
    if (std::find(steps.begin(), steps.end(), index) == steps.end())
      steps.insert(std::upper_bound(steps.begin(), steps.end(), index), index);
  }
}

// The baseline is resolved quietly, by a selector of its own (whose once-per-key log memory must not
// swallow a configuration's line), and logged as what it is: the selector would report it as
// configuration ("via attention_config.default"), which nobody wrote.
Candidate resolve_baseline(const AttentionLayerDesc& desc, Selector& selector) {
  const LogSink previous = set_log_sink([](LogLevel, std::string_view) {});
  Candidate c = resolve_candidate("baseline", baseline_config(), desc, selector);
  set_log_sink(previous);
  c.run.source = "baseline";
  if (c.run.ok())
    log_info("Baseline for role='" + desc.role + "': " + c.run.backend +
             " on the same inputs, the reference for every configuration's time and quality");
  return c;
}

bool has_no_options(const std::optional<AttentionSpec>& spec) {
  return !spec || (!spec->quant && !spec->skip_softmax && !spec->block_sparse && !spec->fastvideo_vsa_topk &&
                   spec->extra.empty());
}

// Same backend, no options, same layer, no schedule: the candidate would repeat the baseline's computation.
bool repeats_baseline(const Candidate& c, const Candidate& baseline) {
  return c.layer && baseline.layer && c.run.schedule.empty() &&
         c.layer->resolution().backend == baseline.layer->resolution().backend &&
         has_no_options(c.layer->resolution().spec);
}

// The memory one sample's tensors (and its key-padding mask, if any) live in while a backend runs:
// the host arrays themselves on a CPU, device copies on a GPU.
class SampleBuffers {
 public:
  static Result<SampleBuffers> prepare(QkvTensors& qkv, std::optional<KeyPaddingMask> mask, bool on_device,
                                       const ModelRole& role) {
    SampleBuffers b;
    b.on_device_ = on_device;
    b.mask_ = std::move(mask);
    const auto& qs = qkv.q.shape();
    b.out_host_ = HostTensor(qkv.q.dtype(), {qs[0], qs[1], qs[2], role.head_size});
    if (!on_device) {
      b.q_ = qkv.q.view();
      b.k_ = qkv.k.view();
      b.v_ = qkv.v.view();
      b.out_ = b.out_host_.view();
      return b;
    }
    DIFFATTN_ASSIGN_OR_RETURN(b.dq_, upload(qkv.q));
    DIFFATTN_ASSIGN_OR_RETURN(b.dk_, upload(qkv.k));
    DIFFATTN_ASSIGN_OR_RETURN(b.dv_, upload(qkv.v));
    DIFFATTN_ASSIGN_OR_RETURN(b.dout_, DeviceBuffer::allocate(b.out_host_.bytes()));
    if (b.mask_) {
      DIFFATTN_ASSIGN_OR_RETURN(b.dmask_, DeviceBuffer::allocate(b.mask_->keep.size()));
      DIFFATTN_RETURN_IF_ERROR(b.dmask_.upload(b.mask_->keep.data(), b.mask_->keep.size()));
    }
    b.q_ = device_view(b.dq_, qkv.q);
    b.k_ = device_view(b.dk_, qkv.k);
    b.v_ = device_view(b.dv_, qkv.v);
    b.out_ = device_view(b.dout_, b.out_host_);
    return b;
  }

  // The video geometry the calls carry, where the sample's sequences are the planned video's.
  void set_video(const std::optional<VideoGeometry>& video) {
    if (video && video->sequence_length() == q_.size(1) && video->sequence_length() == k_.size(1)) video_ = video;
  }

  AttentionProblem problem() const {
    AttentionProblem p;
    p.video = video_;
    p.q = q_;
    p.k = k_;
    p.v = v_;
    p.out = out_;
    if (mask_) {
      // Built here rather than stored: the view must point at this object's own (possibly moved) memory.
      p.mask = on_device_ ? TensorView::Contiguous(dmask_.data(), DType::kBool, {mask_->batch, mask_->keys},
                                                   Device{DeviceKind::kCuda, 0})
                          : mask_->view();
    }
    return p;
  }

  // Poisons the output so elements a backend leaves unwritten show up as NaN in the comparison.
  Status poison() {
    if (on_device_) return dout_.poison();
    std::memset(out_host_.data(), 0xff, out_host_.bytes());
    return Status::Ok();
  }

  Result<HostTensor> fetch_output() {
    if (on_device_) DIFFATTN_RETURN_IF_ERROR(dout_.download(out_host_.data(), out_host_.bytes()));
    return out_host_;
  }

 private:
  static Result<DeviceBuffer> upload(const HostTensor& t) {
    DIFFATTN_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::allocate(t.bytes()));
    DIFFATTN_RETURN_IF_ERROR(d.upload(t.data(), t.bytes()));
    return d;
  }
  static TensorView device_view(const DeviceBuffer& d, const HostTensor& t) {
    const auto& s = t.shape();
    return TensorView::Contiguous(d.data(), t.dtype(), {s[0], s[1], s[2], s[3]}, Device{DeviceKind::kCuda, 0});
  }

  bool on_device_ = false;
  HostTensor out_host_;
  DeviceBuffer dq_, dk_, dv_, dout_, dmask_;
  TensorView q_, k_, v_, out_;
  std::optional<KeyPaddingMask> mask_;
  std::optional<VideoGeometry> video_;
};

class RoleExecutor {
 public:
  RoleExecutor(const WorkloadPlan& plan, const ProgressFn& progress, std::int64_t& done, std::int64_t total)
      : plan_(plan), progress_(progress), done_(done), total_(total) {}

  // Warm-up calls, then timed ones; a failure ends this backend's run for the role.
  Status time_calls(const Attention& layer, SampleBuffers& buffers, BackendRun& run, const std::string& label,
                    const DenoisingStep& step) {
    AttentionProblem problem = buffers.problem();
    problem.denoising = step;
    for (int i = 0; i < plan_.warmup + plan_.repeats; ++i) {
      DIFFATTN_RETURN_IF_ERROR(buffers.poison());
      auto ms = time_call_ms(plan_.on_device, [&] { return layer.forward(problem, nullptr); });
      tick(label);
      if (!ms.ok()) {
        drop(plan_.warmup + plan_.repeats - i - 1, label);
        return ms.status();
      }
      if (i >= plan_.warmup) run.times_ms.push_back(*ms);
    }
    return Status::Ok();
  }

  // Counted calls that will not run after all (a failure) leave the total, so the bar counts
  // only calls that run.
  void skip_calls(const std::string& label) { drop(plan_.warmup + plan_.repeats, label); }

 private:
  void drop(std::int64_t calls, const std::string& label) {
    total_ -= calls;
    if (progress_) progress_(done_, total_, label);
  }

  void tick(const std::string& label) {
    ++done_;
    if (progress_) progress_(done_, total_, label);
  }

  const WorkloadPlan& plan_;
  const ProgressFn& progress_;
  std::int64_t& done_;
  std::int64_t total_;
};

void record_failure(BackendRun& run, const Status& status) {
  run.error = status.message();
  run.error_code = std::string(error_code_name(status.code()));
}

// A role's baseline and configurations, resolved before anything runs so that the progress total
// counts only calls that will run.
struct RoleCandidates {
  Candidate baseline;
  std::vector<Candidate> configured;
};

RoleCandidates resolve_role(const WorkloadPlan& plan, const RolePlan& role, const std::vector<Configuration>& configurations,
                            Selector& selector, Selector& baseline_selector) {
  const AttentionLayerDesc desc = layer_desc(plan, role);
  RoleCandidates r{resolve_baseline(desc, baseline_selector), {}};
  for (const Configuration& c : configurations) {
    r.configured.push_back(resolve_candidate(c.label, c.config, desc, selector, c.schedule ? &*c.schedule : nullptr));
    Candidate& added = r.configured.back();
    added.run.same_as_baseline = repeats_baseline(added, r.baseline);
    if (added.layer && role.video) {
      const Resolution& res = added.layer->resolution();
      if (auto d = sparse_video_density(res.backend, res.spec.value_or(AttentionSpec{}), *role.video)) {
        added.run.density = d->density;
        added.run.density_detail = d->detail;
      }
    }
  }
  return r;
}

// Whether a candidate's calls are in the progress total: it resolved and is not the baseline again.
bool counted(const Candidate& c) { return c.layer.has_value() && !c.run.same_as_baseline; }

Status run_role(const RunRequest& request, const WorkloadPlan& plan, RoleCandidates& resolved, RoleReport& report,
                RoleExecutor& exec, const std::vector<ActivationSample>& samples) {
  Candidate& baseline = resolved.baseline;
  std::vector<Candidate>& candidates = resolved.configured;
  for (const ActivationSample& sample : samples) {
    const std::string where = report.plan.role.role + " " + sample.label;
    auto qkv = materialize(plan, report.plan, sample, request.seed);
    if (!qkv.ok()) return qkv.status();
    report.plan.seqlen_q = qkv->q.shape()[1];
    report.plan.seqlen_kv = qkv->k.shape()[1];
    report.plan.flops_per_call = 4.0 * static_cast<double>(qkv->q.shape()[0]) * report.plan.role.num_heads *
                                 static_cast<double>(report.plan.seqlen_q) * static_cast<double>(report.plan.seqlen_kv) *
                                 report.plan.role.head_size;
    DIFFATTN_ASSIGN_OR_RETURN(std::optional<KeyPaddingMask> mask,
                              text_padding_mask(plan, report.plan, qkv->k.shape()[0], qkv->k.shape()[1]));
    DIFFATTN_ASSIGN_OR_RETURN(SampleBuffers buffers,
                              SampleBuffers::prepare(*qkv, std::move(mask), plan.on_device, report.plan.role));
    buffers.set_video(report.plan.video);
    const DenoisingStep step = runner_step(plan, sample);
    std::optional<HostTensor> reference;
    if (baseline.run.ok()) {
      Status s = exec.time_calls(*baseline.layer, buffers, baseline.run, where + " baseline", step);
      auto out = s.ok() ? buffers.fetch_output() : Result<HostTensor>(s);
      if (out.ok()) reference = std::move(out).value();
      else record_failure(baseline.run, out.status());
    } else if (counted(baseline)) {
      exec.skip_calls(where + " baseline");
    }
    for (Candidate& c : candidates) {
      if (!c.run.ok() || !reference || c.run.same_as_baseline) {
        if (counted(c)) exec.skip_calls(where + " " + c.run.configuration);
        if (reference && c.run.same_as_baseline) merge_worst(c.run.quality, compare_outputs(*reference, *reference));
        continue;
      }
      note_scheduled_step(c, step);
      Status s = exec.time_calls(*c.layer, buffers, c.run, where + " " + c.run.configuration, step);
      auto out = s.ok() ? buffers.fetch_output() : Result<HostTensor>(s);
      if (!out.ok()) {
        record_failure(c.run, out.status());
        continue;
      }
      merge_worst(c.run.quality, compare_outputs(*out, *reference));
    }
  }
  for (Candidate& c : candidates)
    if (c.run.same_as_baseline) c.run.times_ms = baseline.run.times_ms;
  report.baseline = std::move(baseline.run);
  for (Candidate& c : candidates) report.runs.push_back(std::move(c.run));
  report.verdict = choose_verdict(report, request.quality_bound);
  return Status::Ok();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

AttentionConfig baseline_config() {
  AttentionConfig config;
  AttentionSpec spec;
  spec.backend = "TORCH_SDPA";
  config.default_spec = spec;
  return config;
}

Result<RunReport> execute_workload(const RunRequest& request, WorkloadPlan plan,
                                   std::shared_ptr<const Platform> platform,
                                   std::vector<Configuration> configurations, const ProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  RunReport report;
  report.request = request;
  report.platform = platform->info();
  report.created_utc = utc_now();
  Selector selector(platform, &global_registry());
  Selector baseline_selector(platform, &global_registry());
  std::vector<std::vector<ActivationSample>> samples;
  std::vector<RoleCandidates> resolved;
  std::int64_t total = 0;
  for (const RolePlan& role : plan.roles) {
    DIFFATTN_ASSIGN_OR_RETURN(std::vector<ActivationSample> s, role_samples(plan, role, request.activations_dir));
    resolved.push_back(resolve_role(plan, role, configurations, selector, baseline_selector));
    std::int64_t running = counted(resolved.back().baseline) ? 1 : 0;
    for (const Candidate& c : resolved.back().configured) running += counted(c) ? 1 : 0;
    total += static_cast<std::int64_t>(s.size()) * (plan.warmup + plan.repeats) * running;
    samples.push_back(std::move(s));
  }
  DIFFATTN_RETURN_IF_ERROR(check_some_role_has_dumps(plan, request.activations_dir, samples));
  std::int64_t done = 0;
  RoleExecutor exec(plan, progress, done, total);
  for (std::size_t i = 0; i < plan.roles.size(); ++i) {
    RoleReport role;
    role.plan = plan.roles[i];
    if (!samples[i].empty() && !samples[i].front().dump_dir.empty()) role.activations = request.activations_dir;
    DIFFATTN_RETURN_IF_ERROR(run_role(request, plan, resolved[i], role, exec, samples[i]));
    plan.roles[i] = role.plan;
    report.roles.push_back(std::move(role));
  }
  report.plan = std::move(plan);
  report.configurations = std::move(configurations);
  report.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace diffattn::runner
