#include "diffattn/attention.h"

#include <string>
#include <utility>

#include "diffattn/registry.h"

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

}  // namespace

Result<Attention> Attention::Create(const AttentionLayerDesc& desc, const AttentionConfig& config, Selector& selector) {
  DIFFATTN_RETURN_IF_ERROR(check_layer_desc(desc));
  Attention layer;
  layer.desc_ = desc;
  if (layer.desc_.num_kv_heads == 0) layer.desc_.num_kv_heads = desc.num_heads;
  DIFFATTN_ASSIGN_OR_RETURN(layer.resolution_, selector.resolve(desc.role, desc.head_size, config, desc.category,
                                                                desc.traits));
  BackendInit init;
  init.num_heads = layer.desc_.num_heads;
  init.num_kv_heads = layer.desc_.num_kv_heads;
  init.head_size = desc.head_size;
  init.role = desc.role;
  init.explicit_choice = layer.resolution_.spec.has_value();
  init.spec = layer.resolution_.spec;
  init.platform = selector.platform().info();
  DIFFATTN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                            selector.registry().create(layer.resolution_.backend, init));
  layer.backend_ = std::move(backend);
  auto descriptor = selector.registry().find(layer.resolution_.backend);
  layer.takes_gate_ = descriptor.ok() && (*descriptor)->caps.gate;
  return layer;
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
  // A gate changes the result, so a backend that would ignore it must not receive it.
  if (problem.gate && !takes_gate_) {
    return InvalidInput("Attention layer for role='" + desc_.role + "' (" + resolution_.backend +
                        ") got a gate tensor, which only sparse video backends with a coarse branch take "
                        "(FASTVIDEO_VSA); drop the gate or select FASTVIDEO_VSA.");
  }
  // The layer's scale and causal flag hold for every call, whichever backend runs it.
  AttentionProblem call = problem;
  if (!call.scale) call.scale = desc_.scale;
  call.causal = call.causal || desc_.causal;
  return backend_->forward(call, stream);
}

}  // namespace diffattn
