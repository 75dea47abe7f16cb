#include "diffattn/attention.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "diffattn/registry.h"
#include "diffattn/schedule.h"
#include "layer/backend_call_check.h"

namespace diffattn {
namespace {

Status check_layer_desc(const AttentionLayerDesc& desc) {
  const std::string where = "Attention layer for role='" + desc.role + "'";
  if (desc.num_heads <= 0) return InvalidInput(where + ": num_heads must be positive, got " + std::to_string(desc.num_heads) + ".");
  if (desc.head_size <= 0) return InvalidInput(where + ": head_size must be positive, got " + std::to_string(desc.head_size) + ".");
  if (desc.num_kv_heads < 0 || (desc.num_kv_heads > 0 && desc.num_heads % desc.num_kv_heads != 0)) {
    return InvalidInput(where + ": num_heads (" + std::to_string(desc.num_heads) +
                        ") must be a multiple of num_kv_heads (" + std::to_string(desc.num_kv_heads) +
                        "); use num_kv_heads 0 for as many as num_heads.");
  }
  if (desc.role.empty()) return InvalidInput("Attention layer: role must not be empty (e.g. \"self\" or \"cross\").");
  return Status::Ok();
}

std::string expected_vs_got(const char* what, std::int64_t expected, std::int64_t got) {
  return std::string(what) + " " + std::to_string(got) + " (the layer declares " + std::to_string(expected) + ")";
}

Result<std::shared_ptr<Backend>> create_backend(const AttentionLayerDesc& desc, const Resolution& resolution,
                                                Selector& selector) {
  BackendInit init;
  init.num_heads = desc.num_heads;
  init.num_kv_heads = desc.num_kv_heads;
  init.head_size = desc.head_size;
  init.role = desc.role;
  init.explicit_choice = resolution.spec.has_value();
  init.spec = resolution.spec;
  init.platform = selector.platform().info();
  DIFFATTN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, selector.registry().create(resolution.backend, init));
  return std::shared_ptr<Backend>(std::move(backend));
}

bool backend_takes_gate(const Selector& selector, const std::string& backend) {
  auto descriptor = selector.registry().find(backend);
  return descriptor.ok() && (*descriptor)->caps.gate;
}

Result<std::shared_ptr<const BackendCallCheck>> call_check(const Resolution& resolution, const Selector& selector) {
  DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* descriptor, selector.registry().find(resolution.backend));
  return std::make_shared<const BackendCallCheck>(*descriptor, resolution.spec.has_value());
}

// A gate changes the result, so a backend that would ignore it must not receive it.
Status check_gate(const AttentionProblem& call, bool takes_gate, const std::string& role, const std::string& backend) {
  if (!call.gate || takes_gate) return Status::Ok();
  return InvalidInput("Attention layer for role='" + role + "' (" + backend +
                      ") got a gate tensor, which only sparse video backends with a coarse branch take "
                      "(FASTVIDEO_VSA); drop the gate or select FASTVIDEO_VSA.");
}

}  // namespace

// The schedule with a resolution and a backend per profile, and for each range the profile it runs.
struct Attention::Scheduled {
  AttentionSchedule schedule;
  std::vector<Resolution> resolutions;  // profile name order
  std::vector<std::shared_ptr<Backend>> backends;
  std::vector<bool> takes_gate;            // per profile: its backend's Capabilities::gate
  std::vector<std::shared_ptr<const BackendCallCheck>> checks;  // per profile
  std::vector<std::size_t> range_profile;  // range index -> index into resolutions
};

Result<Attention> Attention::Create(const AttentionLayerDesc& desc, const AttentionConfig& config, Selector& selector) {
  return Create(desc, config, nullptr, selector);
}

Result<Attention> Attention::Create(const AttentionLayerDesc& desc, const AttentionConfig& config,
                                    const AttentionSchedule* schedule, Selector& selector) {
  DIFFATTN_RETURN_IF_ERROR(check_layer_desc(desc));
  Attention layer;
  layer.desc_ = desc;
  if (layer.desc_.num_kv_heads == 0) layer.desc_.num_kv_heads = desc.num_heads;
  DIFFATTN_ASSIGN_OR_RETURN(layer.resolution_, selector.resolve(desc.role, desc.head_size, config, desc.category,
                                                                desc.traits));
  DIFFATTN_ASSIGN_OR_RETURN(layer.backend_, create_backend(layer.desc_, layer.resolution_, selector));
  layer.takes_gate_ = backend_takes_gate(selector, layer.resolution_.backend);
  DIFFATTN_ASSIGN_OR_RETURN(layer.check_, call_check(layer.resolution_, selector));
  if (schedule == nullptr) return layer;
  auto scheduled = std::make_shared<Scheduled>();
  scheduled->schedule = *schedule;
  std::vector<std::string> names;
  for (const auto& [name, profile_config] : schedule->profiles) {
    DIFFATTN_ASSIGN_OR_RETURN(Resolution r, selector.resolve_profile(*schedule, name, desc.role, desc.head_size,
                                                                     desc.category, desc.traits));
    DIFFATTN_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, create_backend(layer.desc_, r, selector));
    scheduled->takes_gate.push_back(backend_takes_gate(selector, r.backend));
    DIFFATTN_ASSIGN_OR_RETURN(std::shared_ptr<const BackendCallCheck> check, call_check(r, selector));
    scheduled->checks.push_back(std::move(check));
    scheduled->resolutions.push_back(std::move(r));
    scheduled->backends.push_back(std::move(backend));
    names.push_back(name);
  }
  for (std::size_t i = 0; i < schedule->range_count(); ++i) {
    const auto at = std::find(names.begin(), names.end(), schedule->range_profile(i));
    scheduled->range_profile.push_back(static_cast<std::size_t>(at - names.begin()));
  }
  layer.scheduled_ = std::move(scheduled);
  return layer;
}

std::vector<Resolution> Attention::profile_resolutions() const {
  return scheduled_ ? scheduled_->resolutions : std::vector<Resolution>();
}

Result<const Resolution*> Attention::resolution_for(const DenoisingStep& step) const {
  if (!scheduled_) return &resolution_;
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::size_t> range, scheduled_->schedule.range_for(step));
  if (!range) return &resolution_;
  return &scheduled_->resolutions[scheduled_->range_profile[*range]];
}

// The one place a call is checked and completed; backends receive it as it leaves here.
Status Attention::forward(const AttentionProblem& problem, void* stream) const {
  DIFFATTN_RETURN_IF_ERROR(validate_problem(problem));
  const ProblemShape shape = problem.shape();
  std::string mismatch;
  if (shape.heads_q != desc_.num_heads) mismatch = expected_vs_got("q heads", desc_.num_heads, shape.heads_q);
  else if (shape.heads_kv != desc_.num_kv_heads) mismatch = expected_vs_got("k/v heads", desc_.num_kv_heads, shape.heads_kv);
  else if (shape.head_size != desc_.head_size) mismatch = expected_vs_got("head size", desc_.head_size, shape.head_size);
  if (!mismatch.empty()) {
    return InvalidInput("Attention layer for role='" + desc_.role + "' (" + resolution_.backend + ") got " + mismatch +
                        "; pass tensors shaped for this layer or declare another layer.");
  }
  // The layer's scale and causal flag hold for every call, whichever backend runs it. A dense mask
  // that repeats one row of keys goes on as the key-padding mask it is.
  AttentionProblem call = problem;
  if (!call.scale) call.scale = desc_.scale;
  call.causal = call.causal || desc_.causal;
  if (std::optional<TensorView> keys = repeated_row_as_key_padding(call)) call.mask = *keys;
  ProblemShape call_shape = shape;
  call_shape.causal = call.causal;
  call_shape.mask = call.mask_kind();
  if (!scheduled_) {
    DIFFATTN_RETURN_IF_ERROR(check_gate(call, takes_gate_, desc_.role, resolution_.backend));
    DIFFATTN_RETURN_IF_ERROR(check_->check(call_shape));
    return backend_->forward(call, stream);
  }
  return scheduled_forward(call, call_shape, stream);
}

Status Attention::scheduled_forward(const AttentionProblem& call, const ProblemShape& shape, void* stream) const {
  if (!call.denoising) {
    return InvalidInput("Attention layer for role='" + desc_.role +
                        "' has an attention schedule, so each call must say its denoising step: set "
                        "AttentionProblem::denoising (index, and sigma for a sigma schedule; from C, call "
                        "diffattn_layer_forward_step).");
  }
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::size_t> range, scheduled_->schedule.range_for(*call.denoising));
  if (!range) {
    DIFFATTN_RETURN_IF_ERROR(check_gate(call, takes_gate_, desc_.role, resolution_.backend));
    DIFFATTN_RETURN_IF_ERROR(check_->check(shape));
    return backend_->forward(call, stream);
  }
  const std::size_t profile = scheduled_->range_profile[*range];
  DIFFATTN_RETURN_IF_ERROR(
      check_gate(call, scheduled_->takes_gate[profile], desc_.role, scheduled_->resolutions[profile].backend));
  DIFFATTN_RETURN_IF_ERROR(scheduled_->checks[profile]->check(shape));
  return scheduled_->backends[profile]->forward(call, stream);
}

}  // namespace diffattn
