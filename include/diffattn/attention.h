#pragma once
// The attention layer a model declares. It resolves its backend once, at construction.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diffattn/backend.h"
#include "diffattn/config.h"
#include "diffattn/problem.h"
#include "diffattn/selector.h"
#include "diffattn/status.h"

namespace diffattn {

struct AttentionLayerDesc {
  int num_heads = 0;
  int num_kv_heads = 0;  // 0: same as num_heads
  int head_size = 0;
  std::optional<float> scale;  // default head_size^-1/2
  bool causal = false;
  std::string role = "self";
  std::optional<std::string> category;
  // What the model's path promises its calls (e.g. mask-free and packed: TRTLLM's automatic contract).
  LayerTraits traits;
};

struct AttentionSchedule;
class BackendCallCheck;

class Attention {
 public:
  static Result<Attention> Create(const AttentionLayerDesc& desc, const AttentionConfig& config,
                                  Selector& selector);
  // With an attention schedule (null: none, the same as above): the base configuration and every
  // profile resolve now, for this layer's role (an error names the profile that cannot run), and
  // each call runs the backend of the range its `problem.denoising` falls in, the base
  // configuration's outside every range. A call without `denoising` is then an error.
  static Result<Attention> Create(const AttentionLayerDesc& desc, const AttentionConfig& config,
                                  const AttentionSchedule* schedule, Selector& selector);

  const AttentionLayerDesc& desc() const { return desc_; }
  // The base configuration's resolution.
  const Resolution& resolution() const { return resolution_; }
  // One per schedule profile, in name order (Resolution::profile names it); empty without a schedule.
  std::vector<Resolution> profile_resolutions() const;
  // What runs a call at `step`: a profile's resolution, or the base configuration's.
  Result<const Resolution*> resolution_for(const DenoisingStep& step) const;
  // Runs the resolved backend. The problem must match the layer (heads, head size); the layer's
  // scale applies where the problem sets none, and a causal layer makes every call causal. A gate
  // (AttentionProblem::gate) is refused unless the backend declares that it takes one, and so is a
  // call outside what the backend declares (BackendDescriptor::unsupported_reasons), with its reasons.
  Status forward(const AttentionProblem& problem, void* stream = nullptr) const;

 private:
  Status scheduled_forward(const AttentionProblem& call, const ProblemShape& shape, void* stream) const;

  AttentionLayerDesc desc_;
  Resolution resolution_;
  std::shared_ptr<Backend> backend_;
  bool takes_gate_ = false;  // the backend's Capabilities::gate
  std::shared_ptr<const BackendCallCheck> check_;  // the backend's declarations, verdicts kept per call shape
  struct Scheduled;  // the schedule's profiles, resolved; null without a schedule
  std::shared_ptr<const Scheduled> scheduled_;
};

}  // namespace diffattn
