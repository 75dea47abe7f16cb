#pragma once
// SAGE_ATTN's arithmetic, shared by the CPU implementation (the oracle) and the CUDA kernels:
// the scale groups, the key block over which P is quantized, and the number formats' limits.
// docs/backends/sage_attn.md states the whole procedure; every kernel follows it step by step.

#include <cstdint>
#include <cstring>

#include "kernels/quant/fp8_e4m3.h"
#include "kernels/sparse/host_device.h"

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

// QK16/V8's V scales (FLASHINFER_ATTN's quant mode, QkMode::k16): one power of two 2^e per
// kKvBlock keys of each (batch, kv head), the smallest with amax <= 448 * 2^e, where amax is the
// block's largest |v| over its valid keys and all its channels; the codes are E4M3(v * 2^-e), so
// amax lands in (224, 448]. Each block gets its own scale, so a block of large values costs the
// other blocks no precision, and no pass over all the keys has to run before any is quantized.
// A power of two keeps the kernels' rescaling exact: they carry the output sums in the units of the
// last block's scale and move between blocks by an exact factor. e stays within [-126, 120]
// (2^e and 2^-e are normal floats; a block whose values all lie below 2^-133 keeps fewer bits).
// kZeroVBlock marks a block with no nonzero value (its codes are all 0); a NaN or infinite amax
// gives e = 0, so that the codes carry what the values do (NaN, or 448 for an infinity).
inline constexpr std::int32_t kZeroVBlock = -1024;

DIFFATTN_HOST_DEVICE inline std::uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

DIFFATTN_HOST_DEVICE inline std::int32_t v_block_exponent(float amax) {
  const std::uint32_t bits = float_bits(amax);
  const std::uint32_t biased = (bits >> 23) & 0xffu, mantissa = bits & 0x7fffffu;
  if (biased == 0xffu) return 0;              // NaN or infinity
  if (!(amax > 0.f)) return kZeroVBlock;      // 0 (the largest |v| is never negative)
  if (biased == 0) return -126;               // below 2^-126
  // amax = 1.m * 2^E; 448 = 1.75 * 2^8: amax <= 448 * 2^e for e = E - 8 where 1.m <= 1.75.
  const std::int32_t e = static_cast<std::int32_t>(biased) - 127 - 8 + (mantissa > 0x600000u ? 1 : 0);
  return e < -126 ? -126 : e;
}

// 2^e for e in [-126, 127], exactly.
DIFFATTN_HOST_DEVICE inline float power_of_two(std::int32_t e) {
  const std::uint32_t bits = static_cast<std::uint32_t>(e + 127) << 23;
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// The E4M3 helpers are shared with FLASHINFER_ATTN's QK16/V8 mode (kernels/quant/fp8_e4m3.h).
using fp8::e4m3_round;
using fp8::e4m3_rn_satfinite;
using fp8::e4m3_to_float;
using fp8::quantize_channels_e4m3;

}  // namespace diffattn::sage
