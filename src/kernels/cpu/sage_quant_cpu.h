#pragma once
// SAGE_ATTN's quantization steps on the host, one function per operand, exactly as
// kernels/sage/sage_quant.h and docs/backends/sage_attn.md state them. The CPU attention uses them,
// and tests compare the CUDA quantizer's tensors and scales against them bit for bit.

#include <cmath>
#include <cstdint>
#include <vector>

#include "diffattn/problem.h"
#include "kernels/sage/sage_quant.h"

namespace diffattn::sage {

// clamp(rint(x * reciprocal), -127, 127), rint rounding ties to even; NaN gives 0. Below 2^22 in
// magnitude, adding and taking away 1.5 * 2^23 rounds to the nearest integer (ties to even) exactly
// as rint in the default rounding mode, without a library call, so the loops over it vectorise.
inline std::int8_t quantize_int8(float x, float reciprocal) {
  const float y = x * reciprocal;
  const float r = std::fabs(y) < 4194304.f ? (y + 12582912.f) - 12582912.f : y;
  const float clamped = r < -kInt8Max ? -kInt8Max : (r > kInt8Max ? kInt8Max : r);
  return r != r ? std::int8_t{0} : static_cast<std::int8_t>(clamped);  // INT8 has no NaN
}

// Q scaled by softmax scale * log2(e), INT8 per group of kQGroup rows (1: every row its own scale)
// of one (batch, head).
struct QuantizedQ {
  std::int64_t batch = 0, heads = 0, seqlen = 0, head_size = 0;
  std::vector<std::int8_t> values;  // [B, Hq, Sq, D]
  std::vector<float> scales;        // [B, Hq, ceil(Sq / kQGroup)]: amax / 127, 0 for an all-zero group
  std::int64_t groups() const { return (seqlen + kQGroup - 1) / kQGroup; }
};

// K minus its per-channel mean over the valid keys, INT8 per group of kKGroup keys of one
// (batch, kv head); invalid keys are 0 and take no part in any mean or maximum.
struct QuantizedK {
  std::int64_t batch = 0, heads = 0, seqlen = 0, head_size = 0;
  std::vector<std::int8_t> values;  // [B, Hkv, Skv, D]
  std::vector<float> scales;        // [B, Hkv, ceil(Skv / kKGroup)]
  std::vector<float> means;         // [B, Hkv, D]
  std::int64_t groups() const { return (seqlen + kKGroup - 1) / kKGroup; }
};

// V in E4M3 with one scale per (batch, kv head, channel) over the valid keys.
struct QuantizedV {
  std::int64_t batch = 0, heads = 0, seqlen = 0, head_size = 0;
  std::vector<std::uint8_t> codes;  // [B, Hkv, Skv, D], E4M3 codes; invalid keys 0
  std::vector<float> scales;        // [B, Hkv, D]: amax / 448, 0 for an all-zero channel
};

// Which keys are valid, [B, Skv] (1 keeps): the key-padding mask's, all ones without a mask.
std::vector<std::uint8_t> valid_keys(const AttentionProblem& problem);

// `problem` is a validated CPU problem without a dense mask or packed batches.
QuantizedQ quantize_q(const AttentionProblem& problem);
QuantizedK quantize_k(const AttentionProblem& problem, const std::vector<std::uint8_t>& valid);
QuantizedV quantize_v(const AttentionProblem& problem, const std::vector<std::uint8_t>& valid);

// Smoothing K shifts every score of query row i by -q'_i . mean (log2 units, q' = q * scale *
// log2(e)); softmax ignores it but the LSE does not, so the LSE adds it back. [B, Hq, Sq], fp32.
std::vector<float> lse_shifts(const AttentionProblem& problem, const QuantizedK& k);

}  // namespace diffattn::sage
