#include "kernels/cpu/sage_quant_cpu.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/half_convert.h"

// The per-(batch, head) quantization below is compiled three times by GCC, for AVX-512F, AVX2 and
// the baseline instruction set, and the CPU's features pick one when the library loads (the
// compiler's function clones: run-time dispatch without a table of our own). Every callee is
// inlined into each clone (flatten), so the loops vectorise at the clone's width. None of the three
// targets has FMA, so no product is fused into a later sum and every clone gives the baseline's
// bits (tests/kernels/sage_quant_test.cc compares them with the scalar definitions). Clang, which
// builds the sanitizer preset and does not combine the two attributes, compiles one baseline copy.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DIFFATTN_HOST_QUANT_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#endif
#ifndef DIFFATTN_HOST_QUANT_CLONES
#define DIFFATTN_HOST_QUANT_CLONES
#endif

namespace diffattn::sage {
namespace {

float element(const TensorView& t, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  const std::int64_t at = b * t.stride(0) + s * t.stride(1) + h * t.stride(2) + d * t.stride(3);
  const auto bits = static_cast<const std::uint16_t*>(t.data)[at];
  return t.dtype == DType::kFloat16 ? cpu::half_to_float(bits) : cpu::bf16_to_float(bits);
}

// One (batch, head) of a [B, S, H, D] view as fp32 rows [S, D].
std::vector<float> rows_of(const TensorView& t, std::int64_t b, std::int64_t h) {
  const std::int64_t seqlen = t.size(1), width = t.size(3);
  std::vector<float> rows(static_cast<std::size_t>(seqlen * width));
  if (t.stride(3) != 1) {
    for (std::int64_t s = 0; s < seqlen; ++s)
      for (std::int64_t d = 0; d < width; ++d) rows[static_cast<std::size_t>(s * width + d)] = element(t, b, s, h, d);
    return rows;
  }
  const auto* base = static_cast<const std::uint16_t*>(t.data) + b * t.stride(0) + h * t.stride(2);
  for (std::int64_t s = 0; s < seqlen; ++s) {
    const std::uint16_t* src = base + s * t.stride(1);
    float* dst = rows.data() + s * width;
    if (t.dtype == DType::kFloat16) {
      for (std::int64_t d = 0; d < width; ++d) dst[d] = cpu::half_to_float(src[d]);
    } else {
      for (std::int64_t d = 0; d < width; ++d) dst[d] = cpu::bf16_to_float(src[d]);
    }
  }
  return rows;
}

// Quantizes rows [begin, end) of `rows` (width D) as one INT8 group; returns its scale.
float quantize_group(const float* rows, std::int64_t count, std::int64_t width, std::int8_t* out) {
  // The largest magnitude, over 16 lanes of partial maxima (a maximum is the same in any order; NaN
  // is skipped as std::max skips it) so that the loop vectorises.
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  const std::int64_t total = count * width, whole = total / kLanes * kLanes;
  for (std::int64_t i = 0; i < whole; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float m = std::fabs(rows[i + l]);
      lanes[l] = lanes[l] < m ? m : lanes[l];
    }
  float amax = 0.f;
  for (std::int64_t i = whole; i < total; ++i) amax = std::max(amax, std::fabs(rows[i]));
  for (float m : lanes) amax = std::max(amax, m);
  if (amax == 0.f) {
    std::fill(out, out + count * width, std::int8_t{0});
    return 0.f;
  }
  const float reciprocal = kInt8Max / amax;
  for (std::int64_t i = 0; i < count * width; ++i) out[i] = quantize_int8(rows[i], reciprocal);
  return amax / kInt8Max;
}

std::size_t index3(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t nb, std::int64_t nc) {
  return static_cast<std::size_t>((a * nb + b) * nc + c);
}

// Q of pair bh = b * heads + h: scaled by softmax scale * log2(e), then INT8 per group of kQGroup rows.
DIFFATTN_HOST_QUANT_CLONES void quantize_q_pair(const TensorView& t, std::int64_t bh, float scale_log2, QuantizedQ& q) {
  const std::int64_t b = bh / q.heads, h = bh % q.heads;
  std::vector<float> rows = rows_of(t, b, h);
  for (float& x : rows) x *= scale_log2;
  std::int8_t* out = q.values.data() + bh * q.seqlen * q.head_size;
  for (std::int64_t g = 0; g < q.groups(); ++g) {
    const std::int64_t first = g * kQGroup, count = std::min<std::int64_t>(kQGroup, q.seqlen - first);
    q.scales[index3(b, h, g, q.heads, q.groups())] =
        quantize_group(rows.data() + first * q.head_size, count, q.head_size, out + first * q.head_size);
  }
}

// K of pair bh: the mean over the kept keys taken away (padding keys zero), then INT8 per group of
// kKGroup keys.
DIFFATTN_HOST_QUANT_CLONES void quantize_k_pair(const TensorView& t, std::int64_t bh, const std::uint8_t* valid,
                                                QuantizedK& k) {
  const std::int64_t b = bh / k.heads, h = bh % k.heads, width = k.head_size;
  const std::uint8_t* keep = valid + b * k.seqlen;
  std::vector<float> rows = rows_of(t, b, h);
  std::vector<float> sum(static_cast<std::size_t>(width), 0.f);
  std::int64_t n_valid = 0;
  for (std::int64_t j = 0; j < k.seqlen; ++j) {
    if (!keep[j]) continue;
    ++n_valid;
    for (std::int64_t c = 0; c < width; ++c) sum[c] += rows[j * width + c];
  }
  float* mean = k.means.data() + bh * width;
  for (std::int64_t c = 0; c < width; ++c) mean[c] = n_valid > 0 ? sum[c] / static_cast<float>(n_valid) : 0.f;
  for (std::int64_t j = 0; j < k.seqlen; ++j)
    for (std::int64_t c = 0; c < width; ++c) rows[j * width + c] = keep[j] ? rows[j * width + c] - mean[c] : 0.f;
  std::int8_t* out = k.values.data() + bh * k.seqlen * width;
  for (std::int64_t g = 0; g < k.groups(); ++g) {
    const std::int64_t first = g * kKGroup, count = std::min<std::int64_t>(kKGroup, k.seqlen - first);
    k.scales[index3(b, h, g, k.heads, k.groups())] =
        quantize_group(rows.data() + first * width, count, width, out + first * width);
  }
}

// V of pair bh: E4M3 per channel over the kept keys.
DIFFATTN_HOST_QUANT_CLONES void quantize_v_pair(const TensorView& t, std::int64_t bh, const std::uint8_t* valid,
                                                QuantizedV& v) {
  const std::vector<float> rows = rows_of(t, bh / v.heads, bh % v.heads);
  quantize_channels_e4m3(rows.data(), valid + (bh / v.heads) * v.seqlen, v.seqlen, v.head_size,
                         v.codes.data() + bh * v.seqlen * v.head_size, v.scales.data() + bh * v.head_size);
}

}  // namespace

std::vector<std::uint8_t> valid_keys(const AttentionProblem& p) {
  const std::int64_t batch = p.k.size(0), seqlen = p.k.size(1);
  std::vector<std::uint8_t> valid(static_cast<std::size_t>(batch * seqlen), 1);
  if (p.mask_kind() != MaskKind::kKeyPadding) return valid;
  const TensorView& m = *p.mask;
  const auto* keep = static_cast<const std::uint8_t*>(m.data);
  const std::int64_t batch_stride = m.size(0) == 1 ? 0 : m.stride(0);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t j = 0; j < seqlen; ++j)
      valid[static_cast<std::size_t>(b * seqlen + j)] = keep[b * batch_stride + j * m.stride(1)] != 0;
  return valid;
}

QuantizedQ quantize_q(const AttentionProblem& p) {
  QuantizedQ q;
  q.batch = p.q.size(0), q.seqlen = p.q.size(1), q.heads = p.q.size(2), q.head_size = p.q.size(3);
  q.values.resize(static_cast<std::size_t>(q.batch * q.heads * q.seqlen * q.head_size));
  q.scales.resize(static_cast<std::size_t>(q.batch * q.heads * q.groups()));
  const float scale_log2 = p.softmax_scale() * 1.4426950408889634f;
  const std::int64_t pairs = q.batch * q.heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t bh = 0; bh < pairs; ++bh) quantize_q_pair(p.q, bh, scale_log2, q);
  return q;
}

QuantizedK quantize_k(const AttentionProblem& p, const std::vector<std::uint8_t>& valid) {
  QuantizedK k;
  k.batch = p.k.size(0), k.seqlen = p.k.size(1), k.heads = p.k.size(2), k.head_size = p.k.size(3);
  k.values.resize(static_cast<std::size_t>(k.batch * k.heads * k.seqlen * k.head_size));
  k.scales.resize(static_cast<std::size_t>(k.batch * k.heads * k.groups()));
  k.means.resize(static_cast<std::size_t>(k.batch * k.heads * k.head_size));
  const std::int64_t pairs = k.batch * k.heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t bh = 0; bh < pairs; ++bh) quantize_k_pair(p.k, bh, valid.data(), k);
  return k;
}

std::vector<float> lse_shifts(const AttentionProblem& p, const QuantizedK& k) {
  const std::int64_t batch = p.q.size(0), seqlen = p.q.size(1), heads = p.q.size(2), width = p.q.size(3);
  const std::int64_t group = heads / p.k.size(2);
  const float scale_log2 = p.softmax_scale() * 1.4426950408889634f;
  std::vector<float> shifts(static_cast<std::size_t>(batch * heads * seqlen));
  const std::int64_t pairs = batch * heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t bh = 0; bh < pairs; ++bh) {
    const std::int64_t b = bh / heads, h = bh % heads;
    const float* mean = k.means.data() + (b * k.heads + h / group) * width;
    for (std::int64_t i = 0; i < seqlen; ++i) {
      float shift = 0.f;
      for (std::int64_t c = 0; c < width; ++c) shift += element(p.q, b, i, h, c) * scale_log2 * mean[c];
      shifts[static_cast<std::size_t>(bh * seqlen + i)] = shift;
    }
  }
  return shifts;
}

QuantizedV quantize_v(const AttentionProblem& p, const std::vector<std::uint8_t>& valid) {
  QuantizedV v;
  v.batch = p.v.size(0), v.seqlen = p.v.size(1), v.heads = p.v.size(2), v.head_size = p.v.size(3);
  v.codes.resize(static_cast<std::size_t>(v.batch * v.heads * v.seqlen * v.head_size));
  v.scales.resize(static_cast<std::size_t>(v.batch * v.heads * v.head_size));
  const std::int64_t pairs = v.batch * v.heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t bh = 0; bh < pairs; ++bh) quantize_v_pair(p.v, bh, valid.data(), v);
  return v;
}

}  // namespace diffattn::sage
