#pragma once
// Portable float16 / bfloat16 <-> float32 conversions (round to nearest even). Internal linkage on
// purpose: this header is compiled into files built for different instruction sets.

#include <cstdint>
#include <cstring>

namespace diffattn::cpu {

static inline float bits_to_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline std::uint32_t float_to_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

static inline float bf16_to_float(std::uint16_t h) { return bits_to_float(static_cast<std::uint32_t>(h) << 16); }

static inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t bits = float_to_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

static inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_to_float(sign);
  // Subnormal half: value = mantissa * 2^-24.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

static inline std::uint16_t float_to_half(float f) {
  const std::uint32_t bits = float_to_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (abs >= 0x38800000u) {  // normal half
    const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // Subnormal or zero half: round |f| / 2^-24 to the nearest even integer.
  const float scaled = bits_to_float(abs) * 16777216.0f;
  auto integer = static_cast<std::uint32_t>(scaled);
  const float remainder = scaled - static_cast<float>(integer);
  if (remainder > 0.5f || (remainder == 0.5f && (integer & 1u))) ++integer;
  return static_cast<std::uint16_t>(sign | integer);
}

}  // namespace diffattn::cpu
