#pragma once
// SAGE_ATTN's CPU tile kernel, written once over the instruction-set traits of dense_tile_impl.h
// and instantiated in each instruction-set file beside the dense kernel.
//
// Per item (at most block_q query rows of one head): Q's rows are copied once; K comes transposed
// into panels of NR keys (packed once per call, not per item), and S = Q K^T of each key block runs
// on the dense kernel's register-blocked micro-kernel. On INT8 codes held as floats that product is
// exact: every partial sum is an integer below 2^24 (|sum| <= 127 * 127 * D; the driver takes head
// sizes up to 1024), so each score is float(INT32 dot) * (q_scale * k_scale), the reference's value
// bit for bit. The softmax then rounds P (sage_tile_params.h's PRounding) with the branch-free
// roundings below, and each block's P V is summed in registers of its own before it is added to the
// rescaled output (the two-level accumulation of docs/backends/sage_attn.md), V read in place as
// decoded floats.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/dense_tile_impl.h"
#include "kernels/cpu/sage_tile_params.h"
#include "kernels/quant/fp8_e4m3.h"

namespace diffattn::cpu {

// The roundings of P to the accurate mode's 16-bit types, for 0 <= x and x finite, written without
// branches so that the compiler vectorises their loops (E4M3: fp8::e4m3_round_nonneg). Each equals
// the scalar definition (float_to_bf16, float_to_half) on that range;
// tests/kernels/sage_tile_test.cc checks it.
inline float round_bf16_nonneg(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

inline float round_f16_nonneg(float x) {
  // Below 2^-14 the float16 grid is the subnormals' 2^-24: adding 0.5 (float ulp 2^-24) rounds.
  const float sub = (x + 0.5f) - 0.5f;
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint32_t kept = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;  // 10 mantissa bits
  float normal;
  std::memcpy(&normal, &kept, sizeof normal);
  return x < 6.103515625e-05f ? sub : normal;
}

template <class I>
struct SageTile {
  using V = typename I::V;
  using Dense = DenseTile<I>;
  static constexpr int W = I::kWidth;
  static constexpr int MR = I::kRows;
  static constexpr int NR = I::kWidth * I::kVecs;
  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  static constexpr int kMaxRows = kSageTileMaxRows;

  static std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

  struct Layout {
    std::int64_t rows_pad, bk, q_off, s_off, key_off, total;
    explicit Layout(const SageTileParams& p) {
      rows_pad = round_up(p.block_q, MR);
      bk = round_up(p.kv_block, NR);
      std::int64_t at = 0;
      auto take = [&at](std::int64_t n) {
        const std::int64_t off = at;
        at += round_up(n, 16);
        return off;
      };
      q_off = take(rows_pad * p.d);
      s_off = take(rows_pad * bk);
      key_off = take(bk);  // per key of the block: its K scale, or its -inf bias
      total = at;
    }
  };

  static std::size_t workspace_floats(const SageTileParams& p) { return static_cast<std::size_t>(Layout(p).total); }

  // O[MR x NVC*W] = O * alpha + (P[MR x n] . V[n x NVC*W]), the block's product summed on its own.
  template <int NVC>
  static void pv_block(const float* p, std::int64_t lds, std::int64_t n, const float* v, std::int64_t ldv, float* o,
                       std::int64_t ldo, const float* alpha) {
    V acc[MR][NVC];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < NVC; ++c) acc[r][c] = I::zero();
    Dense::add_products(acc, p, lds, n, v, ldv);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V a = I::set1(alpha[r]);
#pragma GCC unroll 8
      for (int c = 0; c < NVC; ++c) I::store(o + r * ldo + c * W, I::fma(I::load(o + r * ldo + c * W), a, acc[r][c]));
    }
  }

  // One row of one block: scores become rounded P in place; returns alpha, updates m and l.
  static float softmax_row(const SageTileParams& p, float* s, std::int64_t n_pad, float& m, float& l) {
    V vmax = I::set1(kNegInf);
    for (std::int64_t c = 0; c < n_pad; c += W) vmax = I::max(vmax, I::load(s + c));
    const float block_max = I::reduce_max(vmax);
    const float m_new = m > block_max ? m : block_max;
    if (m_new == kNegInf) {  // every key so far is masked: nothing to add
      std::memset(s, 0, static_cast<std::size_t>(n_pad) * sizeof(float));
      return 1.0f;
    }
    const float alpha = m == kNegInf ? 1.0f : std::exp2(m - m_new);
    const V neg_max = I::set1(-m_new);
    for (std::int64_t c = 0; c < n_pad; c += W)
      I::store(s + c, I::exp2(I::add(I::load(s + c), neg_max)));  // -inf (masked) gives exactly 0
    // FP8: the row sum adds the rounded values / 448 (what multiplies V); 16-bit: p before rounding.
    const bool fp8_p = p.rounding == PRounding::kE4m3;
    if (fp8_p)
      for (std::int64_t c = 0; c < n_pad; ++c) s[c] = fp8::e4m3_round_nonneg(s[c] * 448.0f);
    const V weight = I::set1(fp8_p ? 1.0f / 448.0f : 1.0f);
    V vsum = I::zero();
    for (std::int64_t c = 0; c < n_pad; c += W) vsum = I::fma(I::load(s + c), weight, vsum);
    const float row_sum = I::reduce_add(vsum);
    if (p.rounding == PRounding::kBf16)
      for (std::int64_t c = 0; c < n_pad; ++c) s[c] = round_bf16_nonneg(s[c]);
    if (p.rounding == PRounding::kF16)
      for (std::int64_t c = 0; c < n_pad; ++c) s[c] = round_f16_nonneg(s[c]);
    l = l * alpha + row_sum;
    m = m_new;
    return alpha;
  }

  static void run(const SageTileParams& p, const SageItem& w, float* ws, float* o, float* m, float* l) {
    const Layout L(p);
    float* qp = ws + L.q_off;
    float* s = ws + L.s_off;
    float* key = ws + L.key_off;
    const std::int64_t d = p.d, dv = p.dv, rows = w.q_rows, rows_pad = round_up(rows, MR);
    const std::int64_t kv_head = w.head / (p.heads_q / p.heads_kv);
    const std::int64_t qh = w.batch * p.heads_q + w.head, kh = w.batch * p.heads_kv + kv_head;
    const float* k_panels = p.k_panels + kh * ((p.skv + NR - 1) / NR) * d * NR;
    const float* v_base = p.v + kh * p.skv * dv;
    const std::uint8_t* valid = p.valid + w.batch * p.skv;

    std::memcpy(qp, p.q + (qh * p.sq + w.q_begin) * d, static_cast<std::size_t>(rows * d) * sizeof(float));
    std::memset(qp + rows * d, 0, static_cast<std::size_t>((rows_pad - rows) * d) * sizeof(float));
    std::memset(o, 0, static_cast<std::size_t>(rows_pad * dv) * sizeof(float));
    float alpha[kMaxRows];  // rows_pad <= round_up(block_q, MR); sage_cpu.cc keeps block_q within it
    for (std::int64_t r = 0; r < rows_pad; ++r) {
      m[r] = kNegInf;
      l[r] = 0.0f;
    }

    const std::int64_t block = p.kv_block;
    const std::int32_t* listed = nullptr;
    std::int64_t blocks = 0;
    std::int64_t kv_end = p.skv;
    if (p.sparse_offsets != nullptr) {
      const std::int64_t r = qh * p.sparse_q_tiles + w.q_begin / block;
      listed = p.sparse_indices + p.sparse_offsets[r];
      blocks = p.sparse_offsets[r + 1] - p.sparse_offsets[r];
    } else {
      if (p.causal) kv_end = kv_end < w.q_begin + rows ? kv_end : w.q_begin + rows;  // top-left
      blocks = (kv_end + block - 1) / block;
    }
    for (std::int64_t t = 0; t < blocks; ++t) {
      const std::int64_t j0 = (listed != nullptr ? listed[t] : t) * block;
      std::int64_t keys = p.skv - j0 < block ? p.skv - j0 : block;
      if (listed != nullptr && p.sparse_tile_rows != nullptr && p.sparse_tile_rows[j0 / block] < keys)
        keys = p.sparse_tile_rows[j0 / block];
      if (keys <= 0) continue;
      const std::int64_t n_pad = round_up(keys, NR);

      for (std::int64_t c0 = 0; c0 < n_pad; c0 += NR)
        for (std::int64_t r0 = 0; r0 < rows_pad; r0 += MR)
          Dense::qk_micro(qp + r0 * d, d, k_panels + (j0 + c0) * d, s + r0 * L.bk + c0, L.bk);

      // Scores: times the scales, then -inf for invalid keys, keys past the block and (causal)
      // keys past the row.
      if (p.q_scales != nullptr) {
        const float* ks = p.k_scales + kh * ((p.skv + p.k_group - 1) / p.k_group);
        for (std::int64_t c = 0; c < n_pad; ++c) key[c] = c < keys ? ks[(j0 + c) / p.k_group] : 0.0f;
        for (std::int64_t r = 0; r < rows; ++r) {
          const V qs = I::set1(p.q_scales[qh * p.sq + w.q_begin + r]);
          float* srow = s + r * L.bk;
          for (std::int64_t c = 0; c < n_pad; c += W)
            I::store(srow + c, I::mul(I::load(srow + c), I::mul(qs, I::load(key + c))));
        }
      } else {
        const V scale = I::set1(p.score_scale);
        for (std::int64_t r = 0; r < rows; ++r) {
          float* srow = s + r * L.bk;
          for (std::int64_t c = 0; c < n_pad; c += W) I::store(srow + c, I::mul(I::load(srow + c), scale));
        }
      }
      for (std::int64_t c = 0; c < n_pad; ++c) key[c] = c < keys && valid[j0 + c] ? 0.0f : kNegInf;
      for (std::int64_t r = 0; r < rows_pad; ++r) {
        float* srow = s + r * L.bk;
        for (std::int64_t c = 0; c < n_pad; c += W) I::store(srow + c, I::add(I::load(srow + c), I::load(key + c)));
        if (p.causal) {
          const std::int64_t first_hidden = w.q_begin + r + 1 - j0;  // keys j > i are hidden
          for (std::int64_t c = first_hidden < 0 ? 0 : first_hidden; c < n_pad; ++c) srow[c] = kNegInf;
        }
        alpha[r] = softmax_row(p, srow, n_pad, m[r], l[r]);
      }

      // Column panels outermost: a panel of the block's V (128 keys x NR columns) stays in the
      // first-level cache while every row group passes over it.
      std::int64_t e0 = 0;
      for (; e0 + NR <= dv; e0 += NR)
        for (std::int64_t r0 = 0; r0 < rows_pad; r0 += MR)
          pv_block<I::kVecs>(s + r0 * L.bk, L.bk, keys, v_base + j0 * dv + e0, dv, o + r0 * dv + e0, dv, alpha + r0);
      for (; e0 < dv; e0 += W)
        for (std::int64_t r0 = 0; r0 < rows_pad; r0 += MR)
          pv_block<1>(s + r0 * L.bk, L.bk, keys, v_base + j0 * dv + e0, dv, o + r0 * dv + e0, dv, alpha + r0);
    }
  }

  static SageTileKernel kernel(const char* isa) {
    SageTileKernel k;
    k.isa = isa;
    k.panel_keys = NR;
    k.workspace_floats = &workspace_floats;
    k.run = &run;
    return k;
  }
};

}  // namespace diffattn::cpu
