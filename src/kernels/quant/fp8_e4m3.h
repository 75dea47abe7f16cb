#pragma once
// FP8 E4M3 on the host: the "fn" format of the GPU's FP8 conversions (bias 7, 3 mantissa bits, no
// infinities, codes 0x7f and 0xff are NaN, largest finite 448). SAGE_ATTN's P*V and FLASHINFER_ATTN's
// QK16/V8 mode round with these, on the CPU exactly as the GPU's cvt.rn.satfinite does.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace diffattn::fp8 {

inline constexpr float kE4m3Max = 448.f;

// The value of an E4M3 code.
inline float e4m3_to_float(std::uint8_t code) {
  const float sign = (code & 0x80u) != 0 ? -1.f : 1.f;
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m * 2^-9
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);      // (1 + m/8) * 2^(e-7)
}

// e4m3_round of a magnitude (x >= 0, or NaN), without branches so that loops over it vectorise.
// Below 2^-6 the grid is the subnormals' 2^-9: adding 2^14 (whose float ulp is 2^-9) rounds to it,
// ties to even; above, 3 of float's 23 mantissa bits are kept, ties to even (a carry moves to the
// next binade).
inline float e4m3_round_nonneg(float x) {
  x = x < kE4m3Max ? x : (x != x ? x : kE4m3Max);  // saturates, infinity included; NaN stays
  const float sub = (x + 16384.f) - 16384.f;
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint32_t kept = (bits + 0x7ffffu + ((bits >> 20) & 1u)) & ~0xfffffu;
  float normal;
  std::memcpy(&normal, &kept, sizeof normal);
  return x < 0.015625f ? sub : normal;
}

// Round to nearest even E4M3, values beyond +-448 (infinities included) saturate to +-448, NaN stays
// NaN: the GPU's cvt.rn.satfinite.e4m3x2.f32. Returns the rounded value as a float.
inline float e4m3_round(float x) { return std::copysign(e4m3_round_nonneg(std::fabs(x)), x); }

// The E4M3 code of e4m3_round(x), without branches: the magnitude rounded, then its code read from
// the float's fields (exponent with E4M3's bias of 7, 3 mantissa bits) or, below 2^-6, as a count of
// 2^-9 steps (2^-6 itself gives 8, the first normal code, either way).
inline std::uint8_t e4m3_rn_satfinite(float x) {
  std::uint32_t in;
  std::memcpy(&in, &x, sizeof in);
  const auto sign = static_cast<std::uint8_t>((in >> 24) & 0x80u);
  const float r = e4m3_round_nonneg(std::fabs(x));
  std::uint32_t bits;
  std::memcpy(&bits, &r, sizeof bits);
  const std::uint32_t normal = (((bits >> 23) - 120u) << 3) | ((bits >> 20) & 7u);
  const std::uint32_t sub = static_cast<std::uint32_t>(r < 0.015625f ? r * 512.f : 0.f);
  const std::uint32_t code = r != r ? 0x7fu : (r < 0.015625f ? sub : normal);
  return static_cast<std::uint8_t>(sign | code);
}

// Per-channel E4M3 of `n` rows of `width` values (row-major): scales[c] = amax_c / 448 over the rows
// with keep[j] != 0, and the codes of x * (448 / amax_c). Rows not kept and all-zero channels get
// code 0, so keys that no query sees never widen a scale.
inline void quantize_channels_e4m3(const float* rows, const std::uint8_t* keep, std::int64_t n, std::int64_t width,
                                   std::uint8_t* codes, float* scales) {
  for (std::int64_t c = 0; c < width; ++c) scales[c] = 0.f;  // amax first, the scale after
  for (std::int64_t j = 0; j < n; ++j)
    if (keep[j])
      for (std::int64_t c = 0; c < width; ++c) {
        const float m = std::fabs(rows[j * width + c]);
        scales[c] = scales[c] < m ? m : scales[c];  // fmax's value (NaN skipped), without a library call
      }
  // Each channel's factor 448 / amax once (the same quotient as per value); all-zero channels give 0
  // (a mask of 0, so that an infinite or NaN value there gives code 0 too).
  std::vector<float> factors(static_cast<std::size_t>(width));
  std::vector<std::uint8_t> live(static_cast<std::size_t>(width));
  for (std::int64_t c = 0; c < width; ++c) {
    live[static_cast<std::size_t>(c)] = scales[c] != 0.f ? 0xffu : 0u;
    factors[static_cast<std::size_t>(c)] = scales[c] != 0.f ? kE4m3Max / scales[c] : 0.f;
  }
  for (std::int64_t j = 0; j < n; ++j) {
    std::uint8_t* out = codes + j * width;
    if (!keep[j]) {
      std::fill(out, out + width, std::uint8_t{0});
      continue;
    }
    const float* row = rows + j * width;
    // Without a branch per value, so that the loop vectorises.
    for (std::int64_t c = 0; c < width; ++c)
      out[c] = static_cast<std::uint8_t>(e4m3_rn_satfinite(row[c] * factors[static_cast<std::size_t>(c)]) &
                                         live[static_cast<std::size_t>(c)]);
  }
  for (std::int64_t c = 0; c < width; ++c) scales[c] /= kE4m3Max;
}

}  // namespace diffattn::fp8
