#pragma once
// Turns a request into the concrete work: per role, its sequence lengths, the layers and steps
// sampled, and the notes that explain any sampling the machine forced.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diffattn/layer_traits.h"
#include "diffattn/status.h"
#include "models/model_zoo.h"
#include "runner/run_request.h"

namespace diffattn::runner {

struct RolePlan {
  ModelRole role;
  std::int64_t seqlen_q = 0, seqlen_kv = 0;
  std::vector<int> layers;  // sampled layer indices of this role
  double flops_per_call = 0;  // 4 * B * Hq * Sq * Skv * D
  bool text_keys_masked = false;  // its keys hold text and the prompt is shorter than the text budget
  // Self-attention over the video (or the joint video + text sequence, where the zoo says where the
  // text sits): the geometry its calls carry for sparse video backends.
  std::optional<VideoGeometry> video;
};

struct WorkloadPlan {
  const ModelSpec* model = nullptr;
  int height = 0, width = 0, frames = 0, steps = 0;
  std::int64_t video_tokens = 0, audio_tokens = 0;
  int batch = 1;
  std::optional<int> prompt_tokens;  // set: padded text keys beyond it are masked
  DType dtype = DType::kBFloat16;
  bool on_device = false;
  int warmup = 0, repeats = 1;
  std::vector<int> sampled_steps;
  std::vector<RolePlan> roles;
  std::vector<std::string> notes;  // sampling and refusals explained, printed and recorded

  double planned_tflop(int configurations) const;  // everything the run will compute
};

// `configurations` counts the backends compared (the baseline comes on top).
Result<WorkloadPlan> plan_workload(const RunRequest& request, bool on_device, int configurations);

// What the role's layers promise: TRTLLM may be chosen without being named only for a mask-free
// model whose role gets no text-padding mask in this run.
LayerTraits layer_traits(const WorkloadPlan& plan, const RolePlan& role);

// Evenly spaced picks of `count` out of [0, total): 0 and total-1 always among them when count > 1.
std::vector<int> evenly_spaced(int total, int count);

}  // namespace diffattn::runner
