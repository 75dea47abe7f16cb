#include "cli/run_parallel.h"

#include <iostream>
#include <thread>

#include "cli/output.h"
#include "common/text_table.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/log.h"
#include "diffattn/registry.h"
#include "parallel/in_process_communicator.h"
#include "parallel/launcher.h"
#include "runner/sequence_parallel_run.h"
#include "runner/workload_plan.h"

namespace diffattn::cli {
namespace {

// The startup record, printed once: every role's backend and whether it runs sequence-parallel.
void print_resolutions(const runner::WorkloadPlan& plan, const AttentionConfig& config, Selector& selector) {
  TextTable table({"role", "category", "head size", "heads", "backend", "source", "sequence parallel"});
  for (const runner::RolePlan& r : plan.roles) {
    std::optional<std::string_view> category;
    if (r.role.category) category = *r.role.category;
    auto res = selector.resolve(r.role.role, r.role.head_size, config, category, runner::layer_traits(plan, r));
    const bool sp = r.role.query_tokens == r.role.key_tokens && (r.role.query_tokens == "video" || r.role.query_tokens == "joint");
    table.add_row({r.role.role, r.role.category.value_or("-"), std::to_string(r.role.head_size),
                   std::to_string(r.role.num_heads), res.ok() ? res->backend : "cannot run here",
                   res.ok() ? std::string(source_name(res->source)) : "-", sp ? "yes" : "no (local query shards)"});
  }
  std::cout << table.render() << "\n";
}

// 0 when every role ran within the bound; a refusal before any work exits as the ordinary run does
// (2 for the configuration, 3 when it cannot run here); anything else 1. The same on every rank.
int exit_code_of(const runner::ParallelRunReport& report) {
  if (report.ok()) return 0;
  for (const runner::ParallelRoleResult& r : report.roles) {
    if (r.error_code == error_code_name(ErrorCode::kInvalidConfig)) return exit_code_for(ErrorCode::kInvalidConfig);
    if (r.error_code == error_code_name(ErrorCode::kUnsupported)) return exit_code_for(ErrorCode::kUnsupported);
  }
  return 1;
}

int finish(const Result<runner::ParallelRunReport>& report, const CommonOptions& options) {
  if (!report.ok()) return report_error(report.status(), options.json);
  if (options.json) print_json(runner::parallel_report_json(*report));
  else std::cout << runner::parallel_report_text(*report);
  return exit_code_of(*report);
}

int run_in_process(const runner::WorkloadPlan& plan, const AttentionConfig& config, Selector& selector,
                   const runner::RunRequest& request, const parallel::ParallelDegrees& degrees, const CommonOptions& options) {
  auto comms = parallel::make_in_process_group(degrees.world(), std::chrono::minutes(10));
  if (!comms.ok()) return report_error(comms.status(), options.json);
  std::vector<Result<runner::ParallelRunReport>> reports(degrees.world(), Internal("rank did not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < degrees.world(); ++r) {
    threads.emplace_back([&, r] {
      reports[r] = runner::run_sequence_parallel(plan, config, selector, degrees, *(*comms)[r], 0, request.seed,
                                                 request.quality_bound);
    });
  }
  for (std::thread& t : threads) t.join();
  return finish(reports[0], options);
}

// A launched rank: NCCL from the launcher's environment; rank 0 prints, the others report only problems.
int run_launched_rank(const parallel::RankEnvironment& env, const runner::WorkloadPlan& plan, const AttentionConfig& config,
                      Selector& selector, const runner::RunRequest& request, const parallel::ParallelDegrees& degrees,
                      const CommonOptions& options) {
  if (env.world != degrees.world())
    return report_error(InvalidConfig("this rank was launched as one of " + std::to_string(env.world) + " but " +
                                      degrees.describe() + " needs " + std::to_string(degrees.world())),
                        options.json);
  if (env.rank != 0) {
    set_log_sink([rank = env.rank](LogLevel level, std::string_view m) {
      if (level >= LogLevel::kWarning) std::cerr << "[diffattn rank " << rank << "] " << m << "\n";
    });
  }
  auto comm = parallel::nccl_from_environment(env);
  if (!comm.ok()) return report_error(comm.status(), options.json);
  if (env.rank == 0 && !options.json) print_resolutions(plan, config, selector);
  auto report = runner::run_sequence_parallel(plan, config, selector, degrees, **comm, env.device, request.seed,
                                              request.quality_bound);
  if (env.rank != 0) {
    // Rank 0 may be ended by the launcher when this rank fails, so this rank says why itself.
    if (!report.ok()) std::cerr << "[diffattn rank " << env.rank << "] " << report.status().message() << "\n";
    else
      for (const runner::ParallelRoleResult& r : report->roles)
        if (!r.error.empty()) std::cerr << "[diffattn rank " << env.rank << "] role " << r.role << ": " << r.error << "\n";
    return report.ok() ? exit_code_of(*report) : 1;
  }
  return finish(report, options);
}

}  // namespace

int run_sequence_parallel_command(const runner::RunRequest& request, const parallel::ParallelDegrees& degrees,
                                  const CommonOptions& options, const std::vector<std::string>& run_args) {
  auto config = config_from_options(options);
  if (!config.ok()) return report_error(config.status(), options.json);
  auto info = platform_from_options(options);
  if (!info.ok()) return report_error(info.status(), options.json);
  if (info->origin != "probe")
    return report_error(Unsupported("a sequence-parallel run executes attention, so it needs this machine's platform "
                                    "(--platform cpu or cuda), not the description " + info->origin),
                        options.json);
  const bool on_device = info->kind == PlatformKind::kCuda;
  auto env = parallel::rank_environment();
  if (!env.ok()) return report_error(env.status(), options.json);
  // Checked once, before any rank starts: a request the model cannot take is one error, not one per rank.
  auto plan = runner::plan_workload(request, on_device, 1);
  if (!plan.ok()) return report_error(plan.status(), options.json);
  if (on_device && !*env) {
    // The launcher: one process per GPU, each running this same command as its rank.
    auto last = probe_cuda_platform(degrees.world() - 1);
    if (!last.ok())
      return report_error(Unavailable(degrees.describe() + " needs " + std::to_string(degrees.world()) +
                                      " GPUs on this machine, one per rank, but device " + std::to_string(degrees.world() - 1) +
                                      " does not answer: " + last.status().message() + ". Lower --ulysses/--ring"),
                          options.json);
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), run_args.begin(), run_args.end());
    auto code = parallel::launch_local_ranks(degrees.world(), args);
    if (!code.ok()) return report_error(code.status(), options.json);
    return *code;
  }
  auto platform = make_platform(*info, global_registry());
  Selector selector(platform, &global_registry());
  if (*env) return run_launched_rank(**env, *plan, *config, selector, request, degrees, options);
  if (!options.json) {
    std::cout << "diffattn run: " << plan->model->name << " " << plan->height << "x" << plan->width << "x" << plan->frames
              << ", " << plan->video_tokens << " video tokens, " << dtype_name(plan->dtype) << ", batch " << plan->batch
              << "\nplatform: " << info->describe()
              << "\ninputs: uniform values from seed " << request.seed << " (the same tensors on any number of ranks)\n\n";
    print_resolutions(*plan, *config, selector);
  }
  return run_in_process(*plan, *config, selector, request, degrees, options);
}

}  // namespace diffattn::cli
