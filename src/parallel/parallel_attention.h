#pragma once
// Sequence-parallel attention around any backend's layer: Ulysses (all-to-all from sequence shards
// to head shards and back), ring (K/V blocks passed around the ring while each rank attends to the
// block it holds, partial outputs merged by their LSE) and their hybrid. Text tokens joined to the
// image sequence are handled as the seeds' system does: replicated on every rank, sliced by head
// rank, joined to the gathered image sequence (front or rear), and their output gathered over heads.
// Image tokens that do not divide by the ranks are padded and masked (sequence_plan.h).

#include <memory>
#include <optional>
#include <vector>

#include "diffattn/attention.h"
#include "diffattn/problem.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "parallel/communicator.h"
#include "parallel/device_memory.h"
#include "parallel/sequence_plan.h"

namespace diffattn::parallel {

enum class JointPlacement { kFront, kRear };  // text before ([text; image]) or after the image tokens

// One rank's part of a call. Views are contiguous, on the communicator's device.
struct ParallelCall {
  TensorView q, k, v, out;         // this rank's image shard, [B, image_shard(...).length, H or Hkv, D]
  std::int64_t image_tokens = 0;   // image tokens over all ranks
  // Text tokens joined to the image sequence, the same on every rank: q [B, T, H, D], k/v
  // [B, T, Hkv, D]; joint_out [B, T, H, Dv] receives their output. All four or none.
  std::optional<TensorView> joint_q, joint_k, joint_v, joint_out;
  std::optional<TensorView> joint_key_mask;  // bool [B, T]: text keys kept (a prompt shorter than its budget)
  JointPlacement joint_placement = JointPlacement::kFront;
  std::optional<float> scale;
};

// What decides whether a backend can run a call's per-rank attention.
struct ParallelCallShape {
  DType dtype = DType::kBFloat16;
  DeviceKind device = DeviceKind::kCpu;
  std::int64_t batch = 1, image_tokens = 0, joint_tokens = 0, head_size_v = 0;
  bool joint_key_mask = false;
};

class ParallelAttention {
 public:
  // Every rank of `world` (ulysses x ring ranks) calls this together; it splits `world` into the
  // Ulysses and ring groups. `desc` is the layer as the model declares it (all heads).
  static Result<std::unique_ptr<ParallelAttention>> Create(const AttentionLayerDesc& desc, const ParallelDegrees& degrees,
                                                           Communicator& world, const AttentionConfig& config,
                                                           Selector& selector);

  const Resolution& resolution() const { return inner_.resolution(); }
  const ParallelDegrees& degrees() const { return degrees_; }
  int ulysses_rank() const { return ulysses_->rank(); }
  int ring_rank() const { return ring_->rank(); }

  // Whether the backend can run the per-rank attention of calls of this shape (the mask padding
  // needs, the LSE the ring merges); the same answer on every rank, before anything is exchanged.
  Status preflight(const ParallelCallShape& shape) const;

  // Every rank calls it together. A rank that fails aborts its groups, so the others return its
  // reason instead of waiting.
  Status forward(const ParallelCall& call, void* stream = nullptr);

 private:
  struct Workspace;
  ParallelAttention() = default;
  Status check_call(const ParallelCall& call) const;
  Status run(const ParallelCall& call, void* stream);
  Status prepare(const ParallelCall& call, void* stream);
  Status gather_heads(const TensorView& local, std::int64_t heads, DeviceBuffer& send, void* dst,
                      std::int64_t dst_seq, std::int64_t dst_seq0, void* stream);
  Status scatter_heads(const void* src, std::int64_t src_seq, std::int64_t src_seq0, const TensorView& out, void* stream);
  Status gather_text_output(const void* src, std::int64_t src_seq, std::int64_t src_seq0, const TensorView& out,
                            void* stream);
  Status run_ring(const ParallelCall& call, void* stream);
  Status merge_partial(void* stream);

  AttentionLayerDesc desc_;
  ParallelDegrees degrees_;
  Communicator* world_ = nullptr;
  const Registry* registry_ = nullptr;  // the selector's: capabilities for preflight
  std::unique_ptr<Communicator> ulysses_, ring_;
  Attention inner_;  // heads / ulysses of the layer's heads
  std::shared_ptr<Workspace> ws_;
};

}  // namespace diffattn::parallel
