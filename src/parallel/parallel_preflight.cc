// What sequence parallelism needs from a backend, checked from the registry's capabilities before
// any rank exchanges anything, and the layer's creation (head split, groups, inner layer).

#include <string>

#include "diffattn/registry.h"
#include "parallel/parallel_attention.h"

namespace diffattn::parallel {
namespace {

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The per-rank attention calls of one parallel call: the shapes the backend is asked to run.
std::vector<ProblemShape> per_rank_problems(const ParallelCallShape& shape, const ParallelDegrees& degrees,
                                            const AttentionLayerDesc& desc) {
  const SequencePlan plan = plan_sequence(shape.image_tokens, degrees);
  ProblemShape p;
  p.dtype = shape.dtype;
  p.device = shape.device;
  p.batch = shape.batch;
  p.heads_q = desc.num_heads / degrees.ulysses;
  p.heads_kv = (desc.num_kv_heads ? desc.num_kv_heads : desc.num_heads) / degrees.ulysses;
  p.head_size = desc.head_size;
  p.head_size_v = shape.head_size_v ? shape.head_size_v : desc.head_size;
  p.seqlen_q = shape.joint_tokens + plan.chunk;
  std::vector<ProblemShape> problems;
  if (degrees.ring == 1) {
    p.seqlen_kv = shape.joint_tokens + plan.chunk;
    p.mask = plan.padding() || shape.joint_key_mask ? MaskKind::kKeyPadding : MaskKind::kNone;
    problems.push_back(p);
    return problems;
  }
  p.wants_lse = true;
  p.seqlen_kv = plan.chunk;
  p.mask = plan.padding() ? MaskKind::kKeyPadding : MaskKind::kNone;
  problems.push_back(p);
  if (shape.joint_tokens > 0) {
    p.seqlen_kv = shape.joint_tokens;
    p.mask = shape.joint_key_mask ? MaskKind::kKeyPadding : MaskKind::kNone;
    problems.push_back(p);
  }
  return problems;
}

// Backends registered here whose capabilities take `problem` (what to choose instead).
std::vector<std::string> backends_taking(const Registry& registry, const ProblemShape& problem) {
  std::vector<std::string> names;
  for (const std::string& name : registry.names()) {
    auto d = registry.find(name);
    if (d.ok() && (*d)->unsupported_reasons(problem).empty()) names.push_back(name);
  }
  return names;
}

// Why the mode needs what the backend lacks, in one sentence.
std::string needs_of(const ProblemShape& p, const ParallelDegrees& degrees, const SequencePlan& plan) {
  std::vector<std::string> needs;
  if (p.wants_lse)
    needs.push_back("ring attention (ring " + std::to_string(degrees.ring) +
                    ") merges the partial outputs of its K/V blocks by their log-sum-exp, so the backend must return LSE");
  if (p.mask == MaskKind::kKeyPadding && plan.padding())
    needs.push_back(std::to_string(plan.tokens) + " image tokens do not divide by " + std::to_string(degrees.world()) +
                    " ranks, so they are padded to " + std::to_string(plan.padded) +
                    " and the padded keys are masked with a key-padding mask");
  else if (p.mask == MaskKind::kKeyPadding)
    needs.push_back("the text keys carry a key-padding mask");
  return join(needs, "; ");
}

}  // namespace

Status ParallelAttention::preflight(const ParallelCallShape& shape) const {
  const Registry& registry = *registry_;
  auto found = registry.find(resolution().backend);
  if (!found.ok()) return found.status();
  const SequencePlan plan = plan_sequence(shape.image_tokens, degrees_);
  for (const ProblemShape& p : per_rank_problems(shape, degrees_, desc_)) {
    const std::vector<std::string> reasons = (*found)->unsupported_reasons(p);
    if (reasons.empty()) continue;
    const std::vector<std::string> instead = backends_taking(registry, p);
    std::string message = resolution().backend + " cannot run the per-rank attention of role '" + desc_.role + "' under " +
                          degrees_.describe() + ": " + join(reasons, "; ") + ".";
    const std::string needs = needs_of(p, degrees_, plan);
    if (!needs.empty()) message += " Why it is needed: " + needs + ".";
    message += instead.empty() ? " No registered backend takes it here; change the degrees."
                               : " Choose a backend that does (" + join(instead, ", ") + ")" +
                                     (plan.padding() ? " or degrees that divide the image tokens." : ".");
    return Unsupported(message);
  }
  return Status::Ok();
}

Result<std::unique_ptr<ParallelAttention>> ParallelAttention::Create(const AttentionLayerDesc& desc,
                                                                     const ParallelDegrees& degrees, Communicator& world,
                                                                     const AttentionConfig& config, Selector& selector) {
  DIFFATTN_RETURN_IF_ERROR(check_degrees(degrees));
  if (world.size() != degrees.world())
    return InvalidConfig(degrees.describe() + " needs " + std::to_string(degrees.world()) + " ranks, but the communicator has " +
                         std::to_string(world.size()) + "; launch ulysses x ring ranks");
  const int kv_heads = desc.num_kv_heads ? desc.num_kv_heads : desc.num_heads;
  if (desc.num_heads % degrees.ulysses != 0 || kv_heads % degrees.ulysses != 0) {
    std::vector<std::string> divisors;
    for (int d = 1; d <= kv_heads; ++d)
      if (desc.num_heads % d == 0 && kv_heads % d == 0) divisors.push_back(std::to_string(d));
    return InvalidConfig("Ulysses splits heads over its ranks: role '" + desc.role + "' has " + std::to_string(desc.num_heads) +
                         " query and " + std::to_string(kv_heads) + " key/value heads, which do not divide by ulysses " +
                         std::to_string(degrees.ulysses) + "; use a ulysses degree in {" + join(divisors, ", ") +
                         "} and put the rest of the ranks on the ring");
  }
  if (desc.causal)
    return Unsupported("sequence parallelism runs non-causal attention (DiT layers); role '" + desc.role +
                       "' is causal: run it on one rank");
  std::unique_ptr<ParallelAttention> layer(new ParallelAttention());
  layer->desc_ = desc;
  layer->desc_.num_kv_heads = kv_heads;
  layer->degrees_ = degrees;
  layer->world_ = &world;
  layer->registry_ = &selector.registry();
  AttentionLayerDesc inner = layer->desc_;
  inner.num_heads /= degrees.ulysses;
  inner.num_kv_heads /= degrees.ulysses;
  DIFFATTN_ASSIGN_OR_RETURN(layer->inner_, Attention::Create(inner, config, selector));
  if (degrees.ring > 1) {
    // Refused here already: no call can make a backend without LSE run the ring.
    DIFFATTN_ASSIGN_OR_RETURN(const BackendDescriptor* backend, selector.registry().find(layer->resolution().backend));
    if (!backend->caps.lse) {
      std::vector<std::string> with_lse;
      for (const std::string& name : selector.registry().names()) {
        auto d = selector.registry().find(name);
        if (!d.ok() || !(*d)->caps.lse) continue;
        for (DeviceKind kind : (*d)->caps.devices)
          if (kind == world.device()) with_lse.push_back(name);
      }
      return Unsupported(backend->name + " cannot run ring attention (ring " + std::to_string(degrees.ring) + ") for role '" +
                         desc.role + "': the ring merges the partial outputs of its K/V blocks by their log-sum-exp, and " +
                         backend->name + " does not return one. Use --ring 1 (Ulysses alone) or a backend with LSE (" +
                         join(with_lse, ", ") + ")");
    }
  }
  // Rank r is ulysses rank r % ulysses of ring rank r / ulysses: Ulysses groups are neighbours.
  const int r = world.rank();
  DIFFATTN_ASSIGN_OR_RETURN(layer->ulysses_, world.split(r / degrees.ulysses, r));
  DIFFATTN_ASSIGN_OR_RETURN(layer->ring_, world.split(r % degrees.ulysses, r));
  return layer;
}

}  // namespace diffattn::parallel
