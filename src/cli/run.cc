// `diffattn run`: the main job. Runs a DiT model's attention workload through the configured
// backends (or several, with --compare) and reports time and quality against TORCH_SDPA.
// `diffattn tune`: the same run over every backend, writing the fastest per role as a configuration.

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "cli/run_parallel.h"
#include "cli/tuned_config.h"
#include "common/json_text.h"
#include "common/name_hints.h"
#include "common/staged_files.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "runner/configurations.h"
#include "runner/progress_bar.h"
#include "runner/report_html.h"
#include "runner/report_json.h"
#include "runner/report_text.h"
#include "runner/workload_runner.h"

namespace diffattn::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRunFlags =
    "--model, --height, --width, --num-frames, --num-inference-steps, --seed, --layers, --sample-steps, --batch, "
    "--dtype, --compare, --quality-bound, --out-dir, --activations, --warmup, --repeats, --cpu-budget-tflop, --prompt-tokens, "
    "--ulysses, --ring, --diffusion-attention-schedule and the common flags";

constexpr std::string_view kRunHelp =
    "usage: diffattn run [--model NAME] [--height H --width W --num-frames F] [--num-inference-steps N]\n"
    "                    [--seed S] [--layers all|N|0,15,29] [--compare A,B,C] [--quality-bound X] [--out-dir DIR]\n"
    "                    [--prompt-tokens N] [--ulysses N --ring M]\n"
    "\n"
    "Runs every attention role of a model (its heads, head size and sequence lengths at the given resolution)\n"
    "over a sample of its layers and denoising steps, on activations generated from the seed with DiT-like\n"
    "statistics (or real dumps), through the configured backend, and TORCH_SDPA on the same inputs as the\n"
    "baseline. Reports per role: backend, time per call, share of the step, TFLOP/s and quality against the\n"
    "baseline (relL2, cosine, max abs error, PSNR); writes report.json and report.html to --out-dir.\n"
    "Without --model: tiny-dit on a CPU, Wan2.2-TI2V-5B 704x1280x49 on a GPU.\n"
    "\n"
    "  --model NAME               a model zoo name (diffattn resolve --model lists roles); default above\n"
    "  --height H --width W       resolution in pixels (default: the model's)\n"
    "  --num-frames F             video frames (default: the model's; 1 for image models)\n"
    "  --num-inference-steps N    denoising steps of a generation (per-generation totals use it)\n"
    "  --seed S                   activation generator seed (default 0)\n"
    "  --layers all|N|LIST        layers run per role: all, N evenly spaced, or indices 0,15,29 / 0-3\n"
    "                             (default: 3 on a GPU, 2 on a CPU)\n"
    "  --sample-steps N           denoising steps with their own activations (default 1)\n"
    "  --batch N                  batch size (2 = classifier-free guidance in one batch; default 1)\n"
    "  --dtype bfloat16|float16|float32   activation dtype (default bfloat16)\n"
    "  --compare A,B,C            run the workload once per backend (auto = platform default, all = every\n"
    "                             backend that can run here) and give a verdict per role\n"
    "  --quality-bound X          relL2 against the baseline a backend must stay within (default 1e-2)\n"
    "  --out-dir DIR              where report.json and report.html go (default diffattn-runs/MODEL-TIME)\n"
    "  --activations DIR          real Q/K/V dumps: DIR/<role>/{q,k,v}.npy or DIR/<role>/qkv.safetensors\n"
    "                             (tensors q, k, v), or one such set per DIR/<role>/<sample>/\n"
    "  --warmup N --repeats N     untimed and timed calls per sample (default 2/5 on a GPU, 1/3 on a CPU)\n"
    "  --cpu-budget-tflop X       a CPU run larger than this is sampled down, then refused (default 1)\n"
    "  --prompt-tokens N          the prompt fills N of the model's text tokens (1 to its text_tokens) and the\n"
    "                             rest is padding: every role whose keys hold text gets the bool key-padding\n"
    "                             mask a pipeline passes (non-text keys and the first N text keys kept), on\n"
    "                             the baseline and every configuration alike; a backend that refuses the mask\n"
    "                             is reported for that role. Default: no mask\n"
    "  --ulysses N --ring M       sequence parallelism over N x M ranks (docs/parallel.md): Ulysses splits heads over\n"
    "                             N ranks, the ring passes K/V blocks around M; on a CPU the ranks are threads, on\n"
    "                             GPUs one process per GPU over NCCL. Each self/joint role runs across the ranks,\n"
    "                             timed per rank, against the same backend on one rank (scaling and exactness).\n"
    "                             Default 1 and 1: the ordinary run\n"
    "  --diffusion-attention-schedule JSON|@FILE   named profiles (each a whole attention configuration) over\n"
    "                             denoising steps, e.g. {\"profiles\": {\"sparse\": {\"default\": \"SAGE_ATTN\"}},\n"
    "                             \"steps\": [{\"start\": 10, \"end\": null, \"profile\": \"sparse\"}]} (end exclusive;\n"
    "                             or \"sigma\": [{\"low\", \"high\", \"profile\"}] windows of 1 - step/N). Steps no range\n"
    "                             covers use the configuration above. Also --diffusion-attention-schedule.<path> VALUE\n"
    "\n"
    "Common flags:\n";

struct RunFlags {
  runner::RunRequest request;
  std::string out_dir;
  parallel::ParallelDegrees degrees;
};

// The arguments after `run` as given, for the ranks a sequence-parallel run launches.
std::vector<std::string> g_run_args;

Result<std::optional<int>> take_int(ArgReader& reader, std::string_view flag, std::int64_t min, std::int64_t max) {
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> text, reader.take_value(flag));
  if (!text) return std::optional<int>();
  DIFFATTN_ASSIGN_OR_RETURN(std::int64_t v, parse_integer(*text, flag, min, max));
  return std::optional<int>(static_cast<int>(v));
}

Result<double> parse_positive_double(const std::string& text, std::string_view flag) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(v > 0))
    return UsageError(std::string(flag) + " '" + text + "' is not a positive number; write e.g. " + std::string(flag) + " 0.01");
  return v;
}

// Every comma-separated entry must name something: "", "," and "A,,B" are typing mistakes.
Result<std::vector<std::string>> split_compare(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
  if (text.empty() || text.back() == ',') items.push_back("");
  for (const std::string& item : items)
    if (item.empty())
      return UsageError("--compare '" + bounded_echo(text) + "' has an empty entry; give comma-separated backend "
                        "names, e.g. --compare TORCH_SDPA,FLASH_ATTN (or auto, all)");
  return items;
}

Result<RunFlags> take_run_flags(std::vector<std::string>& args) {
  ArgReader reader(args);
  RunFlags flags;
  runner::RunRequest& r = flags.request;
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> model, reader.take_value("--model"));
  r.model = model.value_or("");
  DIFFATTN_ASSIGN_OR_RETURN(r.height, take_int(reader, "--height", 1, 1 << 16));
  DIFFATTN_ASSIGN_OR_RETURN(r.width, take_int(reader, "--width", 1, 1 << 16));
  DIFFATTN_ASSIGN_OR_RETURN(r.frames, take_int(reader, "--num-frames", 1, 1 << 14));
  DIFFATTN_ASSIGN_OR_RETURN(r.steps, take_int(reader, "--num-inference-steps", 1, 10000));
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> seed, reader.take_value("--seed"));
  if (seed) {
    DIFFATTN_ASSIGN_OR_RETURN(std::int64_t s, parse_integer(*seed, "--seed", 0, INT64_MAX));
    r.seed = static_cast<std::uint64_t>(s);
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> layers, reader.take_value("--layers"));
  r.layers = layers.value_or("");
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<int> sample_steps, take_int(reader, "--sample-steps", 1, 1000));
  r.sample_steps = sample_steps.value_or(1);
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<int> batch, take_int(reader, "--batch", 1, 64));
  r.batch = batch.value_or(1);
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> dtype, reader.take_value("--dtype"));
  if (dtype) {
    const auto parsed = parse_dtype(*dtype);
    if (!parsed || !runner::is_activation_dtype(*parsed))
      return UsageError("--dtype '" + *dtype + "' is not an activation dtype; use bfloat16, float16 or float32");
    r.dtype = *parsed;
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::vector<std::string> compare, reader.take_all("--compare"));
  for (const std::string& c : compare) {
    DIFFATTN_ASSIGN_OR_RETURN(std::vector<std::string> items, split_compare(c));
    for (std::string& item : items) r.compare.push_back(std::move(item));
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> bound, reader.take_value("--quality-bound"));
  if (bound) {
    DIFFATTN_ASSIGN_OR_RETURN(r.quality_bound, parse_positive_double(*bound, "--quality-bound"));
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> out_dir, reader.take_value("--out-dir"));
  flags.out_dir = out_dir.value_or("");
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> activations, reader.take_value("--activations"));
  r.activations_dir = activations.value_or("");
  DIFFATTN_ASSIGN_OR_RETURN(r.warmup, take_int(reader, "--warmup", 0, 1000));
  DIFFATTN_ASSIGN_OR_RETURN(r.repeats, take_int(reader, "--repeats", 1, 1000));
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> budget, reader.take_value("--cpu-budget-tflop"));
  if (budget) {
    DIFFATTN_ASSIGN_OR_RETURN(r.cpu_budget_tflop, parse_positive_double(*budget, "--cpu-budget-tflop"));
  }
  // Any integer parses here; the plan checks it against the model's text_tokens and names that range.
  DIFFATTN_ASSIGN_OR_RETURN(r.prompt_tokens, take_int(reader, "--prompt-tokens", INT32_MIN, INT32_MAX));
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<int> ulysses, take_int(reader, "--ulysses", 1, 1024));
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<int> ring, take_int(reader, "--ring", 1, 1024));
  flags.degrees = {ulysses.value_or(1), ring.value_or(1)};
  DIFFATTN_RETURN_IF_ERROR(reader.expect_empty("run", kRunFlags));
  if (flags.degrees.world() > 1 && !r.activations_dir.empty())
    return UsageError("--activations replays one device's dumps; a --ulysses/--ring run generates its inputs from --seed "
                      "(the same tensors on any number of ranks): leave out --activations");
  if (flags.degrees.world() > 1 && !flags.out_dir.empty())
    return UsageError("a --ulysses/--ring run prints its report (--json for JSON) and writes no report files: leave out "
                      "--out-dir");
  if (flags.degrees.world() > 1 && !r.compare.empty())
    return UsageError("--compare runs backends one after another on one device; run --ulysses/--ring with one backend "
                      "(--diffusion-attention-backend NAME) instead");
  return flags;
}

// The embedded default: a workload that finishes in seconds on a CPU, the reference video shape on a GPU.
void apply_embedded_default(runner::RunRequest& r, bool on_device) {
  if (!r.model.empty()) return;
  if (!on_device) {
    r.model = "tiny-dit";
    return;
  }
  r.model = "wan2.2-ti2v-5b";
  if (!r.height && !r.width && !r.frames) {
    r.height = 704;
    r.width = 1280;
    r.frames = 49;
  }
}

std::string default_out_dir(const std::string& model) {
  const std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&t));
  return (fs::path("diffattn-runs") / (model + "-" + stamp)).string();
}

// report.json and report.html are replaced together, so a failed write keeps an earlier run's pair.
Status write_reports(const runner::RunReport& report, const std::string& out_dir, bool quiet) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return InvalidInput("could not create --out-dir " + out_dir + ": " + ec.message());
  const std::string json_path = (fs::path(out_dir) / "report.json").string();
  const std::string html_path = (fs::path(out_dir) / "report.html").string();
  const std::string json = json_text(runner::report_to_json(report), 2) + "\n";
  const std::string html = runner::report_to_html(report);
  StagedFiles files;
  DIFFATTN_RETURN_IF_ERROR(files.stage(json_path, {json}));
  DIFFATTN_RETURN_IF_ERROR(files.stage(html_path, {html}));
  DIFFATTN_RETURN_IF_ERROR(files.commit());
  if (!quiet) std::cout << "\nreports: " << json_path << ", " << html_path << "\n";
  return Status::Ok();
}

// A scheduled configuration's rows: the base configuration on the steps the schedule leaves, then
// each profile on its ranges. Unscheduled: one row for the whole run.
struct ScheduledPart {
  std::string label;  // "" (unscheduled), "base: steps [0, 10)" or "sparse: steps [10, end)"
  std::optional<std::string> profile;
};

std::vector<ScheduledPart> scheduled_parts(const runner::Configuration& c) {
  if (!c.schedule) return {{"", std::nullopt}};
  std::vector<ScheduledPart> parts;
  const std::string base = base_ranges_text(*c.schedule);
  if (!base.empty()) parts.push_back({"base: " + base, std::nullopt});
  for (const auto& [name, profile] : c.schedule->profiles)
    parts.push_back({name + ": " + profile_ranges_text(*c.schedule, name), name});
  return parts;
}

Result<Resolution> resolve_part(Selector& selector, const runner::Configuration& c, const ScheduledPart& part,
                                const runner::WorkloadPlan& plan, const runner::RolePlan& r) {
  std::optional<std::string_view> category;
  if (r.role.category) category = *r.role.category;
  if (part.profile)
    return selector.resolve_profile(*c.schedule, *part.profile, r.role.role, r.role.head_size, category,
                                    runner::layer_traits(plan, r));
  return selector.resolve(r.role.role, r.role.head_size, c.config, category, runner::layer_traits(plan, r));
}

// The startup record: every role under every configuration (and schedule profile), as the selector resolves it.
void print_resolutions(const runner::WorkloadPlan& plan, const std::vector<runner::Configuration>& configs,
                       Selector& selector) {
  const bool scheduled = std::any_of(configs.begin(), configs.end(), [](const auto& c) { return c.schedule.has_value(); });
  std::vector<std::string> columns = {"configuration", "role", "category", "head size", "backend", "source"};
  if (scheduled) columns.insert(columns.begin() + 1, "schedule");
  Table table(columns);
  std::vector<std::string> refusals;
  for (const runner::Configuration& c : configs) {
    for (const ScheduledPart& part : scheduled_parts(c)) {
      for (const runner::RolePlan& r : plan.roles) {
        auto res = resolve_part(selector, c, part, plan, r);
        std::vector<std::string> row = {c.label, r.role.role, r.role.category.value_or("-"),
                                        std::to_string(r.role.head_size), res.ok() ? res->backend : "cannot run here",
                                        res.ok() ? std::string(source_name(res->source)) : "-"};
        if (scheduled) row.insert(row.begin() + 1, part.label.empty() ? "-" : part.label);
        table.add_row(row);
        if (!res.ok()) refusals.push_back(c.label + " / " + r.role.role + ": " + res.status().message());
      }
    }
  }
  std::cout << table.render();
  std::cout << "baseline: " << runner::baseline_config().default_spec->backend
            << " on every role and the same inputs, the reference for time and quality\n";
  for (const std::string& r : refusals) std::cout << "cannot run: " << r << "\n";
  std::cout << "\n";
}

// A single configuration whose explicit backend cannot run, in its base configuration or in any
// schedule profile, is an error before any work starts.
Status check_single_configuration(const runner::WorkloadPlan& plan, const runner::Configuration& config, Selector& selector) {
  for (const ScheduledPart& part : scheduled_parts(config)) {
    for (const runner::RolePlan& r : plan.roles) {
      auto res = resolve_part(selector, config, part, plan, r);
      if (!res.ok()) return res.status();
    }
  }
  return Status::Ok();
}

// diffattn tune's two files, replaced together: the configuration and its tuning record.
Status write_tuned_config(const runner::RunReport& report, const std::string& path, bool quiet) {
  const std::string record_path = tuning_record_path(path);
  std::error_code ec;
  if (const fs::path parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
  if (ec) return InvalidInput("could not create the folder of --output " + path + ": " + ec.message());
  StagedFiles files;
  DIFFATTN_RETURN_IF_ERROR(files.stage(path, {json_text(tuned_config_json(report), 2) + "\n"}));
  DIFFATTN_RETURN_IF_ERROR(files.stage(record_path, {json_text(tuning_record_json(report), 2) + "\n"}));
  DIFFATTN_RETURN_IF_ERROR(files.commit());
  if (!quiet)
    std::cout << "tuned configuration: " << path << " (measurements: " << record_path << ")\n"
              << "use it with --diffusion-attention-config @" << path << "\n";
  return Status::Ok();
}

// `tune_output` is diffattn tune's configuration file; null for diffattn run.
int run_with_options(std::vector<std::string>& args, const CommonOptions& options, const std::string* tune_output) {
  auto flags = take_run_flags(args);
  if (!flags.ok()) return report_error(flags.status(), options.json);
  auto schedule = schedule_from_options(options);
  if (!schedule.ok()) return report_error(schedule.status(), options.json);
  if (flags->degrees.world() > 1) {
    if (*schedule)
      return report_error(UsageError("a --ulysses/--ring run takes one backend for every step; leave out "
                                     "--diffusion-attention-schedule (or run it without --ulysses/--ring)"),
                          options.json);
    auto info = platform_from_options(options);
    if (!info.ok()) return report_error(info.status(), options.json);
    apply_embedded_default(flags->request, info->kind == PlatformKind::kCuda);
    return run_sequence_parallel_command(flags->request, flags->degrees, options, g_run_args);
  }
  auto config = config_from_options(options);
  if (!config.ok()) return report_error(config.status(), options.json);
  auto info = platform_from_options(options);
  if (!info.ok()) return report_error(info.status(), options.json);
  if (info->origin != "probe")
    return report_error(Unsupported("diffattn run executes attention, so it needs this machine's platform (--platform "
                                    "cpu or cuda), not the description " + info->origin + "; use diffattn resolve to plan for it"),
                        options.json);
  const bool on_device = info->kind == PlatformKind::kCuda;
  runner::RunRequest& request = flags->request;
  apply_embedded_default(request, on_device);
  auto configs = runner::make_configurations(*config, request.compare, *info, global_registry(), *schedule);
  if (!configs.ok()) return report_error(configs.status(), options.json);
  auto plan = runner::plan_workload(request, on_device, static_cast<int>(configs->size()));
  if (!plan.ok()) return report_error(plan.status(), options.json);
  // A folder that cannot take the reports is found before the workload runs, not after.
  const std::string out_dir = flags->out_dir.empty() ? default_out_dir(plan->model->name) : flags->out_dir;
  const Status writable = check_folder_writable(out_dir, "--out-dir");
  if (!writable.ok()) return report_error(writable, options.json);
  if (tune_output != nullptr) {
    const fs::path parent = fs::path(*tune_output).parent_path();
    const Status output_writable = check_folder_writable(parent.empty() ? "." : parent.string(), "--output");
    if (!output_writable.ok()) return report_error(output_writable, options.json);
  }
  auto platform = make_platform(*info, global_registry());
  Selector selector(platform, &global_registry());
  if (request.compare.empty()) {
    Status s = check_single_configuration(*plan, configs->front(), selector);
    if (!s.ok()) return report_error(s, options.json);
  }
  if (!options.json) {
    std::cout << runner::workload_header_text(*plan, info->describe(), request) << "\n";
    print_resolutions(*plan, *configs, selector);
  }
  runner::ProgressBar bar(true);
  auto report = runner::execute_workload(request, *plan, platform, *configs,
                                         [&](std::int64_t done, std::int64_t total, const std::string& label) {
                                           bar.update(done, total, label);
                                         });
  bar.finish();
  if (!report.ok()) return report_error(report.status(), options.json);
  if (options.json) print_json(runner::report_to_json(*report));
  else std::cout << runner::report_to_text(*report);
  Status written = write_reports(*report, out_dir, options.json);
  if (!written.ok()) return report_error(written, options.json);
  if (tune_output != nullptr) {
    for (const runner::RoleReport& role : report->roles)
      if (!role.baseline.ok()) return 1;
    Status tuned = write_tuned_config(*report, *tune_output, options.json);
    return tuned.ok() ? 0 : report_error(tuned, options.json);
  }
  // A compared backend that cannot run here, or refuses a call it was given (a mask it cannot
  // take), is a finding; a run that broke is a failure. A single configuration that refused exits 3.
  const std::string unsupported(error_code_name(ErrorCode::kUnsupported));
  bool refused = false;
  for (const runner::RoleReport& role : report->roles) {
    if (!role.baseline.ok()) return 1;
    for (const runner::BackendRun& run : role.runs) {
      if (run.ok() || !run.resolution.is_object()) continue;
      if (run.error_code != unsupported) return 1;
      refused = true;
    }
  }
  return refused && request.compare.empty() ? exit_code_for(ErrorCode::kUnsupported) : 0;
}

int run_only(std::vector<std::string>& args, const CommonOptions& options) {
  return run_with_options(args, options, nullptr);
}

constexpr std::string_view kTuneHelp =
    "usage: diffattn tune [--model NAME] [--output FILE.json] [--quality-bound X] [diffattn run's flags]\n"
    "\n"
    "Runs the model's attention workload (as diffattn run does) through every backend that can run here\n"
    "(--compare narrows the candidates), and writes FILE.json: an AttentionConfig giving each role the\n"
    "fastest backend whose relL2 against the TORCH_SDPA baseline stays within --quality-bound (default\n"
    "1e-2; TORCH_SDPA where none does). Beside it, FILE.tuning.json records every measurement and the\n"
    "platform. Load the result with --diffusion-attention-config @FILE.json (or Python's\n"
    "AttentionConfig.from_file); on another GPU or cuDNN a warning says it was tuned elsewhere.\n"
    "\n"
    "  --output FILE.json         where the configuration goes (default attention-config.json)\n"
    "\n"
    "Common flags:\n";

int tune_with_options(std::vector<std::string>& args, const CommonOptions& options) {
  ArgReader reader(args);
  auto output = reader.take_value("--output");
  if (!output.ok()) return report_error(output.status(), options.json);
  const std::string path = output->value_or("attention-config.json");
  const bool narrowed = std::any_of(args.begin(), args.end(), [](const std::string& a) { return a.starts_with("--compare"); });
  if (!narrowed) args.insert(args.end(), {"--compare", "all"});
  return run_with_options(args, options, &path);
}

}  // namespace

int run_workload(std::vector<std::string> args) {
  g_run_args = args;
  return run_subcommand(args, kRunHelp, run_only, /*accepts_schedule=*/true);
}
int run_tune(std::vector<std::string> args) { return run_subcommand(args, kTuneHelp, tune_with_options); }

}  // namespace diffattn::cli
