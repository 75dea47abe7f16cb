#pragma once
// Every figure one `diffattn run` produced: per role, the baseline and each configuration's
// backend, timings and quality, and the verdict.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/schedule.h"
#include "runner/quality_metrics.h"
#include "runner/run_request.h"
#include "runner/workload_plan.h"

namespace diffattn::runner {

// One configuration compared: a label ("FLASH_ATTN", "configured") and the config it stands for.
struct Configuration {
  std::string label;
  AttentionConfig config;  // the base configuration: every step the schedule leaves out
  std::optional<AttentionSchedule> schedule;
};

// One part of a scheduled configuration's run: a profile (empty: the base configuration), the
// ranges it covers, what it resolved to and which sampled steps ran under it.
struct ScheduleUse {
  std::string profile;
  std::string ranges;  // "steps [10, end)"
  std::string backend;
  std::string source_detail;
  std::vector<int> sampled_steps;
};

struct BackendRun {
  std::string configuration;  // the label, or "baseline"
  std::string backend;        // resolved backend name
  std::string source;         // per_role, category, default, env, platform
  nlohmann::json resolution;  // resolution_to_json, or null when resolution failed
  std::string error;          // why this run did not complete; empty when it did
  std::string error_code;
  std::vector<double> times_ms;  // every timed call
  QualityMetrics quality;        // worst over the sampled calls, against the baseline
  // The baseline's own computation (TORCH_SDPA with no options on the same layer): not run twice;
  // its times are the baseline's and no ratio is reported.
  bool same_as_baseline = false;
  std::vector<ScheduleUse> schedule;  // the base configuration, then each profile; empty without a schedule
  // A sparse video backend's share of tile pairs computed and how it came about (kernels/sparse/
  // sparse_density.h), from its options and the role's geometry; absent for other backends.
  std::optional<double> density;
  std::string density_detail;

  bool ok() const { return error.empty(); }
  double median_ms() const;
  double min_ms() const;
  double max_ms() const;
};

struct Verdict {
  std::optional<std::string> configuration;  // the winner's label; absent when none qualifies
  std::string backend;
  std::string reason;
};

struct RoleReport {
  RolePlan plan;
  std::string activations = "generated";  // or the dump folder the inputs came from
  BackendRun baseline;
  std::vector<BackendRun> runs;  // one per configuration, in order
  Verdict verdict;
};

struct RunReport {
  RunRequest request;
  WorkloadPlan plan;
  PlatformInfo platform;
  std::vector<Configuration> configurations;
  std::vector<RoleReport> roles;
  double wall_seconds = 0;
  std::string created_utc;  // ISO 8601

  // Attention time of one denoising step (all layers of every role) for a configuration label,
  // from each role's median time per call; nullopt when a role did not complete.
  std::optional<double> step_ms(const std::string& configuration) const;
  bool all_ok() const;
};

// Per-call derived figures.
double tflops(double flops, double ms);
// The role's share of the configuration's attention time per step, in [0, 1].
std::optional<double> share_of_step(const RunReport& report, const RoleReport& role, const BackendRun& run);

// Fastest configuration whose worst relL2 against the baseline is within `bound`.
Verdict choose_verdict(const RoleReport& role, double bound);

}  // namespace diffattn::runner
