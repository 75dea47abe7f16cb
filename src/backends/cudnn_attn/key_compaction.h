#pragma once
// Key padding without a bias: the kept keys of each batch gathered to the front of a copy of K and
// V, so that cuDNN's padding mask (per-batch key lengths) skips every dropped key, wherever the mask
// drops it (a prompt padded in the middle of a joint sequence, as well as padding at the end). On
// the device and without reading anything back: the call stays asynchronous and capturable.
// Only for calls without causal masking (gathering moves keys, and causal masking counts positions).

#include <cstdint>

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn::cudnn_attn {

struct KeyCompaction {
  void* k = nullptr;                    // [B, Skv, Hkv, D] contiguous, the kept keys first
  void* v = nullptr;                    // [B, Skv, Hkv, Dv] likewise
  std::int32_t* seq_len_q = nullptr;    // [B], every entry Sq
  std::int32_t* seq_len_kv = nullptr;   // [B], kept keys (at least 1: cuDNN is not given 0)
  std::int32_t* first_kept = nullptr;   // [B], 0, or Skv where the batch keeps no key (its rows are cleared)
  // [B, Skv] scratch: a kept key's row in the copy; for a dropped key, -1 - its rank among the dropped.
  std::int32_t* slot = nullptr;
};

// Whether `problem` (a key-padding mask, checked by the caller) can be gathered: not causal, K and V
// 16-byte aligned with strides and head sizes of whole 16-byte pieces.
bool can_compact_keys(const AttentionProblem& problem);

// The scratch bytes of each buffer of KeyCompaction, in its order (k, v, then the int32 arrays).
std::int64_t compacted_k_bytes(const AttentionProblem& problem);
std::int64_t compacted_v_bytes(const AttentionProblem& problem);

// Fills `out` from problem.mask, problem.k and problem.v; `stream` is a cudaStream_t.
Status launch_key_compaction(const AttentionProblem& problem, const KeyCompaction& out, void* stream);

}  // namespace diffattn::cudnn_attn
