#pragma once
// FLASHINFER_ATTN's QK16/V8 mode on the CPU: V in FP8 E4M3 with one scale per (sequence, kv head,
// channel), taken over the keys that some query of the sequence sees, and attention with P*V on the
// codes (scales applied to the output row). Q*K^T stays in the inputs' 16-bit dtype, read as fp32.

#include <cstdint>
#include <vector>

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn {

struct Fp8Values {
  std::int64_t sequences = 0, heads = 0, seqlen = 0, head_size = 0;  // seqlen: v.size(1)
  std::vector<std::uint8_t> codes;  // [B, Hkv, Skv, Dv] (packed batches: B = 1, Skv = total keys)
  std::vector<float> scales;        // [sequences, Hkv, Dv]: amax / 448, 0 for a channel with no seen nonzero
};

// Whether key j of sequence `s` (local index) is seen by some query row of a query head reading
// kv head `kv_head`: inside the sequence, kept by the mask, not hidden from every row by causality.
// [sequences, Hkv, keys of the sequence] flattened per (sequence, kv head) in key order.
std::vector<std::uint8_t> seen_keys(const AttentionProblem& problem);

// `problem` is a validated CPU problem with float16 or bfloat16 V.
Fp8Values quantize_v_fp8(const AttentionProblem& problem);

// Runs `problem` with V replaced by quantize_v_fp8(problem); nothing is written on failure.
Status run_attention_fp8_v_cpu(const AttentionProblem& problem);

}  // namespace diffattn
