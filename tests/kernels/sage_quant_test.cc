// SAGE_ATTN's number formats and quantization steps (kernels/sage/sage_quant.h,
// kernels/cpu/sage_quant_cpu.h) against independent definitions: the E4M3 code table built from
// the format's fields, round-to-nearest-even by brute force, and the scale groups' properties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/sage_quant_cpu.h"
#include "kernels/sage/sage_quant.h"
#include "parity/cases.h"

namespace diffattn {
namespace {

using sage::e4m3_round;
using sage::e4m3_rn_satfinite;
using sage::e4m3_to_float;

// Every E4M3 code's value from sign, 4 exponent and 3 mantissa bits (bias 7); 0x7f/0xff are NaN.
double decode_by_fields(int code) {
  const int sign = code >> 7, exponent = (code >> 3) & 15, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? mantissa / 8.0 * std::pow(2.0, -6)
                                         : (1.0 + mantissa / 8.0) * std::pow(2.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

bool is_nan_code(int code) { return (code & 0x7f) == 0x7f; }

// The nearest finite code by search, ties to the even code, beyond 448 saturated.
int nearest_code(double x) {
  if (std::fabs(x) >= 448.0) return x > 0 ? 0x7e : 0xfe;
  int best = -1;
  double best_distance = INFINITY;
  for (int code = 0; code < 256; ++code) {
    if (is_nan_code(code) || std::signbit(decode_by_fields(code)) != std::signbit(x)) continue;
    const double distance = std::fabs(decode_by_fields(code) - x);
    if (distance < best_distance || (distance == best_distance && (code & 1) == 0)) best = code, best_distance = distance;
  }
  return best;
}

std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
}

TEST(SageE4m3, EveryCodeDecodesAsItsFieldsSayAndRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    SCOPED_TRACE(code);
    const double expected = decode_by_fields(code);
    const float value = e4m3_to_float(static_cast<std::uint8_t>(code));
    if (is_nan_code(code)) {
      EXPECT_TRUE(std::isnan(value));
      EXPECT_EQ(e4m3_rn_satfinite(value) & 0x7f, 0x7f);
      continue;
    }
    EXPECT_EQ(static_cast<double>(value), expected);
    EXPECT_EQ(e4m3_rn_satfinite(value), code);
    EXPECT_EQ(e4m3_round(value), value);
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.f, -9));
}

TEST(SageE4m3, MidpointsRoundToTheEvenCodeAndNeighboursToTheNearest) {
  for (int code = 0; code < 0x7e; ++code)
    for (int sign : {0, 0x80}) {
      SCOPED_TRACE(code | sign);
      const double low = decode_by_fields(code | sign), high = decode_by_fields((code + 1) | sign);
      const auto mid = static_cast<float>((low + high) / 2);  // exact: E4M3 midpoints need 5 bits
      ASSERT_EQ(static_cast<double>(mid), (low + high) / 2);
      const int even = (code & 1) == 0 ? code : code + 1;
      EXPECT_EQ(e4m3_rn_satfinite(mid), even | sign);
      EXPECT_EQ(e4m3_rn_satfinite(std::nextafter(mid, static_cast<float>(low))), code | sign);
      EXPECT_EQ(e4m3_rn_satfinite(std::nextafter(mid, static_cast<float>(high))), (code + 1) | sign);
    }
}

TEST(SageE4m3, ValuesBeyond448SaturateAndNanStaysNan) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {448.f, 448.5f, 464.f, 480.f, 1e6f, 3e38f, inf}) {
    EXPECT_EQ(e4m3_rn_satfinite(x), 0x7e) << x;
    EXPECT_EQ(e4m3_rn_satfinite(-x), 0xfe) << x;
    EXPECT_EQ(e4m3_round(x), 448.f) << x;
  }
  EXPECT_TRUE(std::isnan(e4m3_round(std::nanf(""))));
  EXPECT_EQ(e4m3_rn_satfinite(std::nanf("")) & 0x7f, 0x7f);
  EXPECT_EQ(e4m3_rn_satfinite(std::ldexp(1.f, -11)), 0x00);  // below half the smallest subnormal
  EXPECT_EQ(e4m3_rn_satfinite(std::ldexp(1.f, -10)), 0x00);  // exactly half: ties to 0 (even)
  EXPECT_EQ(e4m3_rn_satfinite(std::ldexp(3.f, -10)), 0x02);  // 1.5 steps: ties to 2 (even)
}

TEST(SageE4m3, RandomValuesRoundToTheNearestCode) {
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_magnitude(-12.0, 9.5);
  std::bernoulli_distribution negative(0.5);
  for (int n = 0; n < 20000; ++n) {
    const auto x = static_cast<float>((negative(rng) ? -1 : 1) * std::exp2(log_magnitude(rng)));
    ASSERT_EQ(e4m3_rn_satfinite(x), nearest_code(x)) << x << " (seed " << seed << ")";
    ASSERT_EQ(e4m3_round(x), e4m3_to_float(static_cast<std::uint8_t>(nearest_code(x)))) << x;
  }
}

TEST(SageInt8, RoundsTiesToEvenAndClampsToPlusMinus127) {
  EXPECT_EQ(sage::quantize_int8(0.5f, 1.f), 0);
  EXPECT_EQ(sage::quantize_int8(1.5f, 1.f), 2);
  EXPECT_EQ(sage::quantize_int8(2.5f, 1.f), 2);
  EXPECT_EQ(sage::quantize_int8(-2.5f, 1.f), -2);
  EXPECT_EQ(sage::quantize_int8(-3.5f, 1.f), -4);
  EXPECT_EQ(sage::quantize_int8(126.5f, 1.f), 126);
  EXPECT_EQ(sage::quantize_int8(200.f, 1.f), 127);
  EXPECT_EQ(sage::quantize_int8(-200.f, 1.f), -127);
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-130.f, 130.f);
  for (int n = 0; n < 20000; ++n) {
    const float x = value(rng);
    const double floor = std::floor(x), frac = x - floor;
    double nearest = frac < 0.5 ? floor : frac > 0.5 ? floor + 1 : (std::fmod(floor, 2.0) == 0 ? floor : floor + 1);
    nearest = std::min(127.0, std::max(-127.0, nearest));
    ASSERT_EQ(sage::quantize_int8(x, 1.f), nearest) << x << " (seed " << seed << ")";
  }
}

struct Case {
  std::unique_ptr<testing::CaseData> data;
  std::uint64_t seed;
};

Case random_case(DType dtype, std::int64_t seq_q, std::int64_t seq_kv, std::int64_t head_size, bool padded) {
  Case c;
  c.seed = fresh_seed();
  std::mt19937_64 rng(c.seed);
  testing::ParityCase pc;
  pc.dtype = dtype, pc.batch = 2, pc.seq_q = seq_q, pc.seq_kv = seq_kv, pc.heads_q = 4, pc.heads_kv = 2;
  pc.head_size = pc.head_size_v = head_size;
  pc.mask = padded ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
  c.data = testing::make_case_data(pc, rng);
  return c;
}

double input(const TensorView& t, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  return testing::read_element(t, testing::element_offset(t, {b, s, h, d}));
}

TEST(SageQuantize, EveryQRowHasItsOwnScaleCarryingTheSoftmaxScaleAndReachingFullRange) {
  const Case c = random_case(DType::kBFloat16, 37, 20, 64, false);
  const AttentionProblem& p = c.data->problem;
  const sage::QuantizedQ q = sage::quantize_q(p);
  ASSERT_EQ(sage::kQGroup, 1);
  ASSERT_EQ(q.groups(), 37);
  const float scale_log2 = p.softmax_scale() * 1.4426950408889634f;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 4; ++h)
      for (std::int64_t i = 0; i < 37; ++i) {
        const float qs = q.scales[static_cast<std::size_t>((b * 4 + h) * 37 + i)];
        int largest = 0;
        float amax = 0.f;
        for (std::int64_t d = 0; d < 64; ++d) {
          const int v = q.values[static_cast<std::size_t>(((b * 4 + h) * 37 + i) * 64 + d)];
          largest = std::max(largest, std::abs(v));
          const float scaled = static_cast<float>(input(p.q, b, i, h, d)) * scale_log2;
          amax = std::max(amax, std::fabs(scaled));
          ASSERT_LE(std::fabs(v * qs - scaled), 0.5001 * qs) << "seed " << c.seed;
        }
        EXPECT_EQ(largest, 127) << "seed " << c.seed;
        EXPECT_FLOAT_EQ(qs, amax / 127.f) << "the row's own maximum sets its scale; seed " << c.seed;
      }
}

TEST(SageQuantize, KIsSmoothedByTheMeanOfValidKeysOnlyAndPaddingIsZero) {
  const Case c = random_case(DType::kFloat16, 10, 150, 128, true);  // groups of 64, 64 and 22 keys
  const AttentionProblem& p = c.data->problem;
  const std::vector<std::uint8_t> valid = sage::valid_keys(p);
  const sage::QuantizedK k = sage::quantize_k(p, valid);
  ASSERT_EQ(k.groups(), 3);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 2; ++h) {
      for (std::int64_t d = 0; d < 128; ++d) {
        double sum = 0;
        int n = 0;
        for (std::int64_t j = 0; j < 150; ++j)
          if (valid[static_cast<std::size_t>(b * 150 + j)]) sum += input(p.k, b, j, h, d), ++n;
        EXPECT_NEAR(k.means[static_cast<std::size_t>((b * 2 + h) * 128 + d)], sum / n, 1e-5) << "seed " << c.seed;
      }
      for (std::int64_t j = 0; j < 150; ++j) {
        const float ks = k.scales[static_cast<std::size_t>((b * 2 + h) * 3 + j / 64)];
        for (std::int64_t d = 0; d < 128; ++d) {
          const int v = k.values[static_cast<std::size_t>(((b * 2 + h) * 150 + j) * 128 + d)];
          if (!valid[static_cast<std::size_t>(b * 150 + j)]) {
            ASSERT_EQ(v, 0);
            continue;
          }
          const double smoothed = input(p.k, b, j, h, d) - k.means[static_cast<std::size_t>((b * 2 + h) * 128 + d)];
          ASSERT_LE(std::fabs(v * ks - smoothed), 0.5001 * ks + 1e-6) << "seed " << c.seed;
        }
      }
    }
}

TEST(SageQuantize, VHasOneScalePerChannelOverValidKeys) {
  const Case c = random_case(DType::kBFloat16, 10, 90, 64, true);
  const AttentionProblem& p = c.data->problem;
  const std::vector<std::uint8_t> valid = sage::valid_keys(p);
  const sage::QuantizedV v = sage::quantize_v(p, valid);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t d = 0; d < 64; ++d) {
        double amax = 0;
        for (std::int64_t j = 0; j < 90; ++j)
          if (valid[static_cast<std::size_t>(b * 90 + j)]) amax = std::max(amax, std::fabs(input(p.v, b, j, h, d)));
        const float vs = v.scales[static_cast<std::size_t>((b * 2 + h) * 64 + d)];
        EXPECT_EQ(vs, static_cast<float>(amax) / 448.f);
        for (std::int64_t j = 0; j < 90; ++j) {
          const std::uint8_t code = v.codes[static_cast<std::size_t>(((b * 2 + h) * 90 + j) * 64 + d)];
          if (!valid[static_cast<std::size_t>(b * 90 + j)]) {
            ASSERT_EQ(code, 0);
            continue;
          }
          const double x = input(p.v, b, j, h, d), back = e4m3_to_float(code) * vs;
          // E4M3 keeps 4 significant bits above 2^-6 (relative error <= 2^-4), a step of 2^-9 below.
          ASSERT_LE(std::fabs(back - x), std::max(std::fabs(x) / 16, std::ldexp(static_cast<double>(vs), -10)) * 1.0001) << "seed " << c.seed;
        }
      }
}

// The whole-tensor passes are compiled as vectorised clones (sage_quant_cpu.cc); each value they
// give must be the scalar definition's, bit for bit: quantize_int8 of the scaled (Q) or smoothed
// (K) input with the group's factor, e4m3_rn_satfinite of V times its channel's factor. Lengths that
// are no multiple of a vector, both input types, head sizes 64 and 128, padded keys.
TEST(SageQuantize, TheVectorisedPassesGiveTheScalarDefinitionsBits) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (const std::int64_t d : {64, 128}) {
      const Case c = random_case(dtype, 29, 77, d, /*padded=*/true);
      const AttentionProblem& p = c.data->problem;
      const std::vector<std::uint8_t> valid = sage::valid_keys(p);
      const sage::QuantizedQ q = sage::quantize_q(p);
      const sage::QuantizedK k = sage::quantize_k(p, valid);
      const sage::QuantizedV v = sage::quantize_v(p, valid);
      const float scale_log2 = p.softmax_scale() * 1.4426950408889634f;
      // Each group's or channel's largest magnitude, taken here as the definition says.
      const auto int8_of = [](const std::vector<float>& xs, std::vector<std::int8_t>& out) {
        float amax = 0.f;
        for (float x : xs) amax = std::max(amax, std::fabs(x));
        out.clear();
        for (float x : xs) out.push_back(amax == 0.f ? std::int8_t{0} : sage::quantize_int8(x, sage::kInt8Max / amax));
      };
      std::size_t wrong_q = 0, wrong_k = 0, wrong_v = 0;
      std::vector<float> xs;
      std::vector<std::int8_t> want;
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t h = 0; h < 4; ++h)
          for (std::int64_t g = 0; g < q.groups(); ++g) {
            const std::int64_t first = g * sage::kQGroup, last = std::min<std::int64_t>(29, first + sage::kQGroup);
            xs.clear();
            for (std::int64_t i = first; i < last; ++i)
              for (std::int64_t e = 0; e < d; ++e) xs.push_back(static_cast<float>(input(p.q, b, i, h, e)) * scale_log2);
            int8_of(xs, want);
            for (std::size_t n = 0; n < want.size(); ++n)
              wrong_q += q.values[static_cast<std::size_t>(((b * 4 + h) * 29 + first) * d) + n] != want[n];
          }
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t h = 0; h < 2; ++h) {
          const float* mean = k.means.data() + (b * 2 + h) * d;
          for (std::int64_t g = 0; g < k.groups(); ++g) {
            const std::int64_t first = g * sage::kKGroup, last = std::min<std::int64_t>(77, first + sage::kKGroup);
            xs.clear();
            for (std::int64_t j = first; j < last; ++j)
              for (std::int64_t e = 0; e < d; ++e)
                xs.push_back(valid[static_cast<std::size_t>(b * 77 + j)] ? static_cast<float>(input(p.k, b, j, h, e)) - mean[e]
                                                                        : 0.f);
            int8_of(xs, want);
            for (std::size_t n = 0; n < want.size(); ++n)
              wrong_k += k.values[static_cast<std::size_t>(((b * 2 + h) * 77 + first) * d) + n] != want[n];
          }
          for (std::int64_t e = 0; e < d; ++e) {
            float amax = 0.f;
            for (std::int64_t j = 0; j < 77; ++j)
              if (valid[static_cast<std::size_t>(b * 77 + j)]) amax = std::max(amax, std::fabs(static_cast<float>(input(p.v, b, j, h, e))));
            for (std::int64_t j = 0; j < 77; ++j) {
              const bool kept = valid[static_cast<std::size_t>(b * 77 + j)] != 0;
              const std::uint8_t want_v =
                  kept && amax != 0.f ? e4m3_rn_satfinite(static_cast<float>(input(p.v, b, j, h, e)) * (448.f / amax)) : 0;
              wrong_v += v.codes[static_cast<std::size_t>(((b * 2 + h) * 77 + j) * d + e)] != want_v;
            }
          }
        }
      EXPECT_EQ(wrong_q, 0u) << "Q, head size " << d << " (seed " << c.seed << ")";
      EXPECT_EQ(wrong_k, 0u) << "K, head size " << d << " (seed " << c.seed << ")";
      EXPECT_EQ(wrong_v, 0u) << "V, head size " << d << " (seed " << c.seed << ")";
    }
}

}  // namespace
}  // namespace diffattn
