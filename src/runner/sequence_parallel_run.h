#pragma once
// `diffattn run --ulysses N --ring M`: a model's sequence-parallel roles run across ranks (threads
// with the in-process communicator on a CPU, one process per GPU over NCCL), timed per rank, against
// the same backend on one rank over the whole sequence for time (scaling) and output (exactness).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffattn/selector.h"
#include "parallel/communicator.h"
#include "parallel/sequence_plan.h"
#include "runner/workload_plan.h"

namespace diffattn::runner {

struct ParallelRoleResult {
  std::string role, backend, source;
  std::int64_t image_tokens = 0, text_tokens = 0;
  std::string skipped;             // why the role does not run sequence-parallel (cross attention, causal)
  std::string error;               // a refusal or failure (the same on every rank)
  std::string error_code;
  double single_rank_ms = 0;       // rank 0, the whole sequence on one device
  std::vector<double> rank_ms;     // per rank, the parallel call
  double rel_l2 = 0, max_abs = 0;  // worst rank against the single-rank result of its rows
  double speedup() const;
  double efficiency() const;       // speedup / ranks
};

struct ParallelRunReport {
  parallel::ParallelDegrees degrees;
  std::string engine;  // "in-process" or "nccl"
  std::string model;
  std::vector<ParallelRoleResult> roles;
  double quality_bound = 1e-2;
  bool ok() const;  // every run role succeeded within the quality bound
};

// Every rank of `world` calls this with the same plan and configuration. `device` is this rank's
// CUDA device (ignored on a CPU). Rank 0's report holds every rank's times and the worst quality.
Result<ParallelRunReport> run_sequence_parallel(const WorkloadPlan& plan, const AttentionConfig& config,
                                                Selector& selector, const parallel::ParallelDegrees& degrees,
                                                parallel::Communicator& world, int device, std::uint64_t seed,
                                                double quality_bound);

std::string parallel_report_text(const ParallelRunReport& report);
nlohmann::json parallel_report_json(const ParallelRunReport& report);

}  // namespace diffattn::runner
