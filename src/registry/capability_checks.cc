#include "registry/capability_checks.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/strings.h"

namespace diffattn::capability {
namespace {

std::string device_name(DeviceKind kind) { return kind == DeviceKind::kCuda ? "cuda" : "cpu"; }

template <typename T>
bool contains(const std::vector<T>& items, const T& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

}  // namespace

Reason check_device(const Capabilities& caps, const ProblemShape& problem) {
  if (contains(caps.devices, problem.device)) return std::nullopt;
  return "device " + device_name(problem.device) + " is not supported (runs on: " +
         join(caps.devices, ", ", "none", device_name) + ")";
}

Reason check_dtype(const Capabilities& caps, const ProblemShape& problem) {
  if (contains(caps.dtypes, problem.dtype)) return std::nullopt;
  return "dtype " + std::string(dtype_name(problem.dtype)) + " is not supported (supported: " +
         join(caps.dtypes, ", ", "none", [](DType d) { return std::string(dtype_name(d)); }) + ")";
}

Reason check_head_size(const Capabilities& caps, const ProblemShape& problem) {
  const auto fits = [&](std::int64_t h) { return caps.supports_head_size(static_cast<int>(h)); };
  if (!fits(problem.head_size)) {
    return "head_size " + std::to_string(problem.head_size) + " is not supported (supported: " +
           caps.head_size_rule() + ")";
  }
  if (problem.head_size_v != 0 && problem.head_size_v != problem.head_size && !fits(problem.head_size_v)) {
    return "value head_size " + std::to_string(problem.head_size_v) + " is not supported (supported: " +
           caps.head_size_rule() + ")";
  }
  return std::nullopt;
}

Reason check_gqa(const Capabilities& caps, const ProblemShape& problem) {
  if (caps.gqa || problem.heads_q == problem.heads_kv) return std::nullopt;
  return "grouped-query attention (q_heads=" + std::to_string(problem.heads_q) +
         ", kv_heads=" + std::to_string(problem.heads_kv) + ") is not supported";
}

Reason check_causal(const Capabilities& caps, const ProblemShape& problem) {
  if (caps.causal || !problem.causal) return std::nullopt;
  return "causal attention is not supported";
}

Reason check_mask(const Capabilities& caps, const ProblemShape& problem) {
  if (problem.mask == MaskKind::kKeyPadding && !caps.key_padding_mask) {
    return "key-padding masks [B, Skv] are not supported";
  }
  if (problem.mask == MaskKind::kDense && !caps.dense_mask) {
    return "dense masks [B|1, H|1, Sq, Skv] are not supported";
  }
  return std::nullopt;
}

Reason check_lse(const Capabilities& caps, const ProblemShape& problem) {
  if (caps.lse || !problem.wants_lse) return std::nullopt;
  return "log-sum-exp output is not supported";
}

Reason check_cross(const Capabilities& caps, const ProblemShape& problem) {
  if (caps.cross || problem.seqlen_q == problem.seqlen_kv) return std::nullopt;
  return "query and key lengths must match (Sq=" + std::to_string(problem.seqlen_q) +
         ", Skv=" + std::to_string(problem.seqlen_kv) + ")";
}

Reason check_varlen(const Capabilities& caps, const ProblemShape& problem) {
  if (caps.varlen || !problem.varlen) return std::nullopt;
  return "packed variable-length batches (cu_seqlens) are not supported";
}

Reason check_video_geometry(const Capabilities& caps, const ProblemShape& problem) {
  if (!caps.needs_video_geometry || problem.video_geometry) return std::nullopt;
  return "the call carries no video geometry; pass the latent's frames x height x width, whose tokens are the "
         "sequence (AttentionProblem::video in C++, diffattn_call_extras.video in C, video=(frames, height, width) in "
         "Python)";
}

Reason check_gate(const Capabilities& caps, const ProblemShape& problem) {
  if (caps.gate || !problem.gate) return std::nullopt;
  return "a gate tensor is not supported (only sparse video backends with a coarse branch take one)";
}

}  // namespace diffattn::capability
