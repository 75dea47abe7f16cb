#pragma once
// One attention call in DiT layout: q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D] (Hq a multiple of
// Hkv), out [B, Sq, Hq, Dv]; optional boolean keep-mask, causal flag, log-sum-exp output,
// packed variable-length batches, and the video geometry and gate of sparse video backends.

#include <cstdint>
#include <optional>
#include <string>

#include "diffattn/dtype.h"
#include "diffattn/status.h"
#include "diffattn/tensor.h"

namespace diffattn {

enum class MaskKind {
  kNone,
  kKeyPadding,  // bool [B, Skv]: True keeps the key
  kDense,       // bool [B|1, H|1, Sq, Skv], broadcast over size-1 dims
};

std::string_view mask_kind_name(MaskKind kind);

// The latent video that a call's tokens are: q's and k's sequences hold frames x height x width
// tokens in row-major (frame, row, column) order, after `text_before` and before `text_after`
// non-video tokens (a joint attention's text). Sparse video backends tile it: FASTVIDEO_VSA takes
// video tokens only; RAINFUSION_ATTN keeps the text dense.
struct VideoGeometry {
  std::int64_t frames = 0, height = 0, width = 0;
  std::int64_t text_before = 0, text_after = 0;
  std::int64_t tokens() const { return frames * height * width; }  // video tokens
  std::int64_t sequence_length() const { return text_before + tokens() + text_after; }
};

// What a backend needs to know to say whether it can run a call, without any tensor data.
struct ProblemShape {
  DType dtype = DType::kBFloat16;
  DeviceKind device = DeviceKind::kCpu;
  std::int64_t batch = 1;
  std::int64_t seqlen_q = 0;
  std::int64_t seqlen_kv = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_size = 0;
  std::int64_t head_size_v = 0;
  bool causal = false;
  MaskKind mask = MaskKind::kNone;
  bool wants_lse = false;
  bool varlen = false;  // packed batches described by cu_seqlens
  bool video_geometry = false;  // AttentionProblem::video is set
  bool gate = false;            // AttentionProblem::gate is set
  bool operator==(const ProblemShape&) const = default;
};

// Where a call sits in the denoising loop, for what varies over steps: the attention schedule picks
// its profile by `index` (or `sigma`), and step- or layer-dependent backends read it too.
struct DenoisingStep {
  std::int64_t index = 0;                 // 0-based denoising step
  std::int64_t num_steps = 0;             // steps of the generation; 0: not known
  std::optional<double> sigma;            // normalised noise level in [0, 1], where the pipeline knows it
  std::optional<std::int64_t> layer;      // the model's layer index of this call, where it matters
};

struct AttentionProblem {
  TensorView q, k, v, out;
  std::optional<TensorView> mask;  // bool keep-mask, [B, Skv] or [B|1, H|1, Sq, Skv]
  std::optional<TensorView> lse;   // float32 [B, Hq, Sq], natural log; -inf for fully masked rows
  std::optional<float> scale;      // default head_size^-1/2
  bool causal = false;             // top-left aligned, as PyTorch's is_causal

  // Packed variable-length batches: q/k/v/out are [1, total, H, D]; cu_seqlens are int32 [B+1]
  // on the same device; lse is then [1, Hq, total_q].
  std::optional<TensorView> cu_seqlens_q, cu_seqlens_k;
  std::int64_t max_seqlen_q = 0, max_seqlen_k = 0;

  // Sparse video attention: the geometry of q's and k's tokens (Sq = Skv = its sequence_length()),
  // and FASTVIDEO_VSA's gate [B, Sq, Hq, Dv] in out's dtype (out = fine + coarse * gate). Other
  // backends ignore the geometry; the layer refuses a gate for a backend that takes none.
  std::optional<VideoGeometry> video;
  std::optional<TensorView> gate;
  // The denoising step of the call; a layer with an attention schedule needs it.
  std::optional<DenoisingStep> denoising;

  float softmax_scale() const;
  MaskKind mask_kind() const;
  ProblemShape shape() const;
  bool is_varlen() const { return cu_seqlens_q.has_value() || cu_seqlens_k.has_value(); }
  // Batches described by the call: q.size(0), or len(cu_seqlens_q) - 1 for packed batches.
  std::int64_t num_batches() const;
};

// A dense mask [B, 1|H, Sq, Skv] that repeats one row of keys over every query and head (stride 0
// there, as torch's expand gives, or size 1) says no more than a key-padding mask: returns the
// key-padding view [B, Skv] of the same memory, which the layer passes on instead, so that
// backends take their key-padding path (the same keep bits). nullopt for every other mask, and
// for a mask broadcast over the batch (size 1 where B > 1).
std::optional<TensorView> repeated_row_as_key_padding(const AttentionProblem& problem);

// General head-size limits of a problem; backends restrict further through their capabilities.
inline constexpr std::int64_t kMinHeadSize = 8;
inline constexpr std::int64_t kMaxHeadSize = 512;

// Checks that the views describe one valid problem (ranks, matching sizes, Hq % Hkv, dtypes,
// devices, mask shape, lse shape, video geometry and gate, no aliasing of out with the inputs). Every backend calls this
// before touching memory; messages say which tensor is wrong and what shape was expected.
// For CPU views the cu_seqlens values are read and checked too (0-based, non-decreasing, within
// the packed length); for CUDA views only their shape and dtype are.
Status validate_problem(const AttentionProblem& problem);

}  // namespace diffattn
