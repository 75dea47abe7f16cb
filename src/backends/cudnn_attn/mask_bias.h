#pragma once
// What CUDNN_ATTN gives cuDNN for masks that are not a kept key prefix, and for packed batches:
//  - an additive bias built from a boolean keep-mask (0 where kept, -inf where dropped), in the
//    inputs' dtype, with the mask's broadcast dimensions kept as broadcasts;
//  - the first kept key of every mask row, from which the rows the mask empties are found and set
//    to the documented result after cuDNN ran (zeros, LSE -inf), since cuDNN leaves them undefined;
//  - the ragged offsets and sequence lengths of packed batches, and the LSE moved from cuDNN's
//    token-major layout to diffattn's [1, Hq, total_q].

#include <cstdint>

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn::cudnn_attn {

// A mask as cuDNN's bias sees it: [mb, mh, mq, skv], mq == 1 for key-padding masks (broadcast over
// queries). Rows are skv_pad elements apart (a multiple of 8, so every row starts 16-byte aligned).
struct MaskBias {
  void* bias = nullptr;                 // [mb, mh, mq, skv_pad], 16-bit
  std::int32_t* first_kept = nullptr;   // [mb, mh, mq]; skv where the row keeps no key
  std::int64_t mb = 1, mh = 1, mq = 1, skv = 0, skv_pad = 0;
  std::int64_t rows() const { return mb * mh * mq; }
};

// The bias's dimensions for `problem`'s mask (a [B, Skv] mask is [B, 1, 1, Skv]).
MaskBias mask_bias_dims(const AttentionProblem& problem);

// Fills `out.bias` and `out.first_kept` from `problem.mask`; `stream` is a cudaStream_t.
Status launch_mask_bias(const AttentionProblem& problem, const MaskBias& out, void* stream);

// Writes zeros to the output rows whose mask row (with the causal limit) keeps no key, and -inf
// to their LSE.
Status launch_clear_empty_rows(const AttentionProblem& problem, const MaskBias& bias, void* stream);

// Packed batches as cuDNN takes them: per-sequence lengths and element offsets of each sequence's
// first token in q, k, v, out, and in the token-major LSE scratch [total_q, Hq].
struct RaggedOffsets {
  std::int32_t* seq_len_q = nullptr;   // [B]
  std::int32_t* seq_len_kv = nullptr;  // [B]
  std::int32_t* q = nullptr;           // [B + 1] each
  std::int32_t* k = nullptr;
  std::int32_t* v = nullptr;
  std::int32_t* o = nullptr;
  std::int32_t* stats = nullptr;
};

Status launch_ragged_offsets(const AttentionProblem& problem, const RaggedOffsets& out, void* stream);

// After a packed call: sequences without keys get zero outputs and LSE -inf; the LSE (when asked)
// is copied from `stats` ([total_q, Hq], may be null when no LSE is asked) to problem.lse.
Status launch_finish_ragged(const AttentionProblem& problem, const float* stats, void* stream);

}  // namespace diffattn::cudnn_attn
