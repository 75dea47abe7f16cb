#include "runner/workload_plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/name_hints.h"
#include "diffattn/config.h"
#include "runner/text_padding_mask.h"

namespace diffattn::runner {
namespace {

constexpr int kDefaultDeviceLayers = 3;
constexpr int kDefaultCpuLayers = 2;

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string format_tflop(double tflop) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", tflop);
  return buf;
}

// A --layers count or index past every role of the model is a mistake, not a request to skip:
// it names the model's layer count. Roles with fewer layers than the largest still skip with a note.
Status check_layers_fit_model(const ModelSpec& model, const std::string& selector) {
  if (selector.empty() || selector == "all") return Status::Ok();
  int most = 0;
  for (const ModelRole& role : model.roles) most = std::max(most, role.layers);
  const std::string range = "model '" + model.name + "' has " + std::to_string(most) + " layers per role (indices 0-" +
                            std::to_string(most - 1) + ")";
  if (all_digits(selector) && selector.size() < 6) {
    if (std::stoi(selector) <= most) return Status::Ok();
    return InvalidConfig("--layers " + selector + " asks for more layers than exist: " + range + "; give 1 to " +
                         std::to_string(most) + ", or 'all'");
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::set<std::int64_t> indices, parse_index_selector(selector, "--layers"));
  if (indices.empty() || *indices.rbegin() < most) return Status::Ok();
  return InvalidConfig("--layers " + bounded_echo(selector) + " names layer " + std::to_string(*indices.rbegin()) +
                       ", but " + range + "; give indices below " + std::to_string(most));
}

// The layers of one role that the --layers selector names.
Result<std::vector<int>> select_layers(const std::string& selector, int role_layers, bool on_device,
                                       const std::string& role, std::vector<std::string>& notes) {
  if (selector == "all") return evenly_spaced(role_layers, role_layers);
  if (selector.empty()) return evenly_spaced(role_layers, on_device ? kDefaultDeviceLayers : kDefaultCpuLayers);
  if (all_digits(selector) && selector.find(',') == std::string::npos && selector.size() < 6) {
    const int count = std::stoi(selector);
    if (count <= 0) return InvalidConfig("--layers 0 samples nothing; give a count >= 1, 'all', or indices like 0,15,29");
    return evenly_spaced(role_layers, count);
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::set<std::int64_t> indices, parse_index_selector(selector, "--layers"));
  std::vector<int> picked;
  for (std::int64_t i : indices)
    if (i < role_layers) picked.push_back(static_cast<int>(i));
  if (picked.size() < indices.size())
    notes.push_back("role '" + role + "' has " + std::to_string(role_layers) +
                    " layers: --layers indices beyond it are skipped for this role");
  if (picked.empty())
    return InvalidConfig("--layers " + selector + " names no layer of role '" + role + "' (layers 0-" +
                         std::to_string(role_layers - 1) + ")");
  return picked;
}

Result<RolePlan> plan_role(const ModelSpec& model, const ModelRole& role, const RunRequest& request,
                           const WorkloadPlan& plan, std::vector<std::string>& notes) {
  RolePlan rp;
  rp.role = role;
  DIFFATTN_ASSIGN_OR_RETURN(RoleShape shape, role_shape(model, role, plan.height, plan.width, plan.frames));
  rp.seqlen_q = shape.query_tokens;
  rp.seqlen_kv = shape.key_tokens;
  DIFFATTN_ASSIGN_OR_RETURN(rp.layers, select_layers(request.layers, role.layers, plan.on_device, role.role, notes));
  if (plan.prompt_tokens && *plan.prompt_tokens < model.text_tokens) {
    DIFFATTN_ASSIGN_OR_RETURN(TextKeys where, text_keys_of(model, role));
    rp.text_keys_masked = where != TextKeys::kNone;
  }
  if (role.query_tokens == role.key_tokens && (role.query_tokens == "video" || role.query_tokens == "joint")) {
    DIFFATTN_ASSIGN_OR_RETURN(VideoGeometry g, latent_video(model, plan.height, plan.width, plan.frames));
    if (role.query_tokens == "joint") {
      if (model.joint_text == "first") g.text_before = model.text_tokens;
      if (model.joint_text == "last") g.text_after = model.text_tokens;
    }
    if (g.sequence_length() == rp.seqlen_q) rp.video = g;
  }
  rp.flops_per_call = 4.0 * plan.batch * role.num_heads * static_cast<double>(rp.seqlen_q) *
                      static_cast<double>(rp.seqlen_kv) * role.head_size;
  return rp;
}

// A CPU run bigger than the budget first drops to one warm-up-free call per role, then is refused.
Status fit_cpu_budget(WorkloadPlan& plan, const RunRequest& request, int configurations) {
  const double budget = request.cpu_budget_tflop;
  if (plan.planned_tflop(configurations) <= budget) return Status::Ok();
  const double asked = plan.planned_tflop(configurations);
  plan.warmup = 0;
  plan.repeats = 1;
  plan.sampled_steps.resize(1);
  for (RolePlan& r : plan.roles) r.layers.resize(1);
  const double reduced = plan.planned_tflop(configurations);
  if (reduced <= budget) {
    plan.notes.push_back("CPU run: the requested sample (" + format_tflop(asked) + " TFLOP) exceeds --cpu-budget-tflop " +
                         format_tflop(budget) + "; sampled down to one layer and one step per role, one timed call each");
    return Status::Ok();
  }
  return Unsupported("a CPU run of " + plan.model->name + " at " + std::to_string(plan.height) + "x" +
                     std::to_string(plan.width) + "x" + std::to_string(plan.frames) + " needs " + format_tflop(reduced) +
                     " TFLOP even with one layer and one step per role (budget " + format_tflop(budget) +
                     " TFLOP); run on a GPU, choose a smaller --height/--width/--num-frames, or raise "
                     "--cpu-budget-tflop to run it anyway");
}

// The prompt length must fit the model's text budget; the message names the range.
Status check_prompt_tokens(const ModelSpec& model, const std::optional<int>& prompt_tokens) {
  if (!prompt_tokens) return Status::Ok();
  if (model.text_tokens <= 0)
    return InvalidConfig("--prompt-tokens: model '" + model.name + "' has no text tokens to mask; run without it");
  if (*prompt_tokens < 1 || *prompt_tokens > model.text_tokens)
    return InvalidConfig("--prompt-tokens " + std::to_string(*prompt_tokens) + " is out of range for " + model.name +
                         ": give 1 to " + std::to_string(model.text_tokens) + " (its text_tokens)");
  return Status::Ok();
}

}  // namespace

std::vector<int> evenly_spaced(int total, int count) {
  count = std::min(count, total);
  std::vector<int> picks;
  if (count <= 0) return picks;
  if (count == 1) return {0};
  for (int i = 0; i < count; ++i) {
    const int v = static_cast<int>(std::lround(static_cast<double>(i) * (total - 1) / (count - 1)));
    if (picks.empty() || picks.back() != v) picks.push_back(v);
  }
  return picks;
}

double WorkloadPlan::planned_tflop(int configurations) const {
  double flops = 0;
  for (const RolePlan& r : roles)
    flops += r.flops_per_call * static_cast<double>(r.layers.size()) * static_cast<double>(sampled_steps.size());
  return flops * (warmup + repeats) * (1 + configurations) / 1e12;
}

LayerTraits layer_traits(const WorkloadPlan& plan, const RolePlan& role) {
  return LayerTraits{.allows_trtllm_default = plan.model->attention_mask_free && !role.text_keys_masked};
}

Result<WorkloadPlan> plan_workload(const RunRequest& request, bool on_device, int configurations) {
  DIFFATTN_ASSIGN_OR_RETURN(const ModelSpec* model, find_model(request.model));
  WorkloadPlan plan;
  plan.model = model;
  plan.height = request.height.value_or(model->default_height);
  plan.width = request.width.value_or(model->default_width);
  plan.frames = request.frames.value_or(model->default_frames);
  plan.steps = request.steps.value_or(model->default_steps);
  plan.batch = request.batch;
  DIFFATTN_RETURN_IF_ERROR(check_prompt_tokens(*model, request.prompt_tokens));
  plan.prompt_tokens = request.prompt_tokens;
  plan.dtype = request.dtype;
  plan.on_device = on_device;
  plan.warmup = request.warmup.value_or(on_device ? 2 : 1);
  plan.repeats = request.repeats.value_or(on_device ? 5 : 3);
  if (plan.steps <= 0) return InvalidConfig("--num-inference-steps must be >= 1");
  if (request.sample_steps <= 0) return InvalidConfig("--sample-steps must be >= 1");
  if (plan.batch <= 0) return InvalidConfig("--batch must be >= 1");
  if (plan.repeats <= 0 || plan.warmup < 0) return InvalidConfig("--repeats must be >= 1 and --warmup >= 0");
  DIFFATTN_ASSIGN_OR_RETURN(plan.video_tokens, video_tokens(*model, plan.height, plan.width, plan.frames));
  plan.audio_tokens = audio_tokens(*model, plan.frames);
  plan.sampled_steps = evenly_spaced(plan.steps, request.sample_steps);
  DIFFATTN_RETURN_IF_ERROR(check_layers_fit_model(*model, request.layers));
  for (const ModelRole& role : model->roles) {
    DIFFATTN_ASSIGN_OR_RETURN(RolePlan rp, plan_role(*model, role, request, plan, plan.notes));
    plan.roles.push_back(std::move(rp));
  }
  if (!on_device) DIFFATTN_RETURN_IF_ERROR(fit_cpu_budget(plan, request, configurations));
  return plan;
}

}  // namespace diffattn::runner
