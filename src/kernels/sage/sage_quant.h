#pragma once
// SAGE_ATTN's arithmetic, shared by the CPU implementation (the oracle) and the CUDA kernels:
// the scale groups, the key block over which P is quantized, and the number formats' limits.
// docs/backends/sage_attn.md states the whole procedure; every kernel follows it step by step.

#include <cstdint>

#include "kernels/quant/fp8_e4m3.h"

namespace diffattn::sage {

// Query rows sharing one INT8 scale (per batch and head): 1, every row its own. The outlier
// channels DiT queries carry make a shared scale coarse for every other row of its group; a scale
// per row costs the attention kernel nothing (each thread's accumulators span two rows).
inline constexpr int kQGroup = 1;
inline constexpr int kKGroup = 64;     // keys sharing one INT8 scale (per batch and kv head), after smoothing
inline constexpr int kKvBlock = 128;   // keys per online-softmax block: P is quantized against this block's max
inline constexpr float kInt8Max = 127.f;
inline constexpr float kE4m3Max = fp8::kE4m3Max;
inline constexpr float kLog2E4m3Max = 8.807354922057604f;  // log2(448): the LSE of the FP8 mode's 448 p row sums

// How P*V is computed: FP8 E4M3 P and per-channel-scaled FP8 V (the default), or P rounded to the
// input dtype against unquantized V (the accurate mode, extra {"pv": "fp16"}).
enum class PvMode { kFp8, kFp16 };

// How Q*K^T is computed: INT8 Q and smoothed INT8 K (SAGE_ATTN), or the inputs' own 16-bit values
// with fp32 sums (FLASHINFER_ATTN's QK16/V8 mode, which runs the FP8 P*V arithmetic above on
// exact scores: no smoothing, no scales, the softmax scale applied to the fp32 score).
enum class QkMode { kInt8, k16 };

// The E4M3 helpers are shared with FLASHINFER_ATTN's QK16/V8 mode (kernels/quant/fp8_e4m3.h).
using fp8::e4m3_round;
using fp8::e4m3_rn_satfinite;
using fp8::e4m3_to_float;
using fp8::quantize_channels_e4m3;

}  // namespace diffattn::sage
