#pragma once
// The tiled online-softmax kernel, written once over an instruction-set traits type `I`:
//   I::V                       vector of I::kWidth floats
//   I::kWidth, kRows, kVecs    lanes, query rows per micro-kernel, vectors per micro-kernel row
//   zero, set1, load, store, add, mul, fma, max, exp2 (0 for -inf), reduce_max, reduce_add
//   f16_row(src, n, dst)       contiguous float16 -> float32
// Each instruction-set file instantiates it with a traits type of internal linkage, so the
// differently compiled copies never meet at link time.
//
// Per work item (query block of one head): Q is packed once, scaled into base-2 logits; for each
// key tile (every tile, or the block-sparse list of the params) K is packed transposed in panels of kWidth*kVecs keys and V row-major, both as fp32;
// S = Q K^T and O += P V run as register-blocked micro-kernels; memory is O(tile), never Sq x Skv.
// Key tiles the mask (and the causal cut) empty for the whole query block are skipped.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/dense_tile_params.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/quant/fp8_e4m3.h"

namespace diffattn::cpu {

template <class I>
struct DenseTile {
  using V = typename I::V;
  static constexpr int W = I::kWidth;
  static constexpr int MR = I::kRows;
  static constexpr int NV = I::kVecs;
  static constexpr int NR = W * NV;
  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  static std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }
  static std::int64_t smaller(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
  static std::int64_t larger(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

  // Sizes of one work item's buffers (in floats), each rounded to a 64-byte multiple.
  struct Layout {
    std::int64_t bq, bk, d, dv_pad;
    std::int64_t q_off, kt_off, v_off, s_off, o_off, m_off, l_off, alpha_off, bias_off, total;
    explicit Layout(const DenseTileParams& p) {
      bq = round_up(p.block_q, MR);
      bk = round_up(p.block_k, NR);
      d = p.head_size;
      dv_pad = round_up(p.head_size_v, W);
      std::int64_t at = 0;
      auto take = [&at](std::int64_t n) {
        const std::int64_t off = at;
        at += round_up(n, 16);
        return off;
      };
      q_off = take(bq * d);
      kt_off = take(bk * d);
      v_off = take(bk * dv_pad);
      s_off = take(bq * bk);
      o_off = take(bq * dv_pad);
      m_off = take(bq);
      l_off = take(bq);
      alpha_off = take(bq);
      bias_off = take(bk);
      total = at;
    }
  };

  static std::size_t workspace_floats(const DenseTileParams& p) { return static_cast<std::size_t>(Layout(p).total); }

  // Reads n elements at `base + offset + i * stride` as float32.
  static void load_row(const void* base, ElemType elem, std::int64_t offset, std::int64_t stride, std::int64_t n,
                       float* dst) {
    switch (elem) {
      case ElemType::kF32: {
        const float* src = static_cast<const float*>(base) + offset;
        if (stride == 1) {
          std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
        } else {
          for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i * stride];
        }
        return;
      }
      case ElemType::kBF16: {
        const auto* src = static_cast<const std::uint16_t*>(base) + offset;
        for (std::int64_t i = 0; i < n; ++i) dst[i] = bits_to_float(static_cast<std::uint32_t>(src[i * stride]) << 16);
        return;
      }
      case ElemType::kF16: {
        const auto* src = static_cast<const std::uint16_t*>(base) + offset;
        if (stride == 1) {
          I::f16_row(src, n, dst);
        } else {
          for (std::int64_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i * stride]);
        }
        return;
      }
    }
  }

  // n E4M3 codes at `base + offset + i * stride` as the float values of the codes (unscaled).
  static void load_e4m3_row(const void* base, std::int64_t offset, std::int64_t stride, std::int64_t n, float* dst) {
    static const auto* const values = [] {
      static float table[256];
      for (int code = 0; code < 256; ++code) table[code] = fp8::e4m3_to_float(static_cast<std::uint8_t>(code));
      return table;
    }();
    const auto* src = static_cast<const std::uint8_t*>(base) + offset;
    for (std::int64_t i = 0; i < n; ++i) dst[i] = values[src[i * stride]];
  }

  static void store_value(void* base, ElemType elem, std::int64_t offset, float value) {
    switch (elem) {
      case ElemType::kF32: static_cast<float*>(base)[offset] = value; return;
      case ElemType::kBF16: static_cast<std::uint16_t*>(base)[offset] = float_to_bf16(value); return;
      case ElemType::kF16: static_cast<std::uint16_t*>(base)[offset] = float_to_half(value); return;
    }
  }

  // acc[MR x NC*W] += A[MR x n] . B[n x NC*W], A's rows lda apart, B's rows ldb apart: the
  // register-blocked rank-one updates every micro-kernel here (and SAGE_ATTN's, sage_tile_impl.h)
  // is built on.
  template <int NC>
  static void add_products(V (&acc)[MR][NC], const float* a, std::int64_t lda, std::int64_t n, const float* b,
                           std::int64_t ldb) {
    for (std::int64_t k = 0; k < n; ++k) {
      V bk[NC];
#pragma GCC unroll 8
      for (int v = 0; v < NC; ++v) bk[v] = I::load(b + k * ldb + v * W);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const V ar = I::set1(a[r * lda + k]);
#pragma GCC unroll 8
        for (int v = 0; v < NC; ++v) acc[r][v] = I::fma(ar, bk[v], acc[r][v]);
      }
    }
  }

  // S[MR x NR] = Q[MR x d] . Kt_panel[d x NR]
  static void qk_micro(const float* q, std::int64_t d, const float* kt, float* s, std::int64_t lds) {
    V acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = I::zero();
    add_products(acc, q, d, d, kt, NR);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) I::store(s + r * lds + v * W, acc[r][v]);
  }

  // O[MR x NVC*W] = O * alpha (per row) + P[MR x n] . V[n x NVC*W]
  template <int NVC>
  static void pv_micro(const float* p, std::int64_t lds, std::int64_t n, const float* vp, std::int64_t ldv, float* o,
                       std::int64_t ldo, const float* alpha) {
    V acc[MR][NVC];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V a = I::set1(alpha[r]);
#pragma GCC unroll 8
      for (int v = 0; v < NVC; ++v) acc[r][v] = I::mul(I::load(o + r * ldo + v * W), a);
    }
    add_products(acc, p, lds, n, vp, ldv);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NVC; ++v) I::store(o + r * ldo + v * W, acc[r][v]);
  }

  static bool mask_keeps(const DenseTileParams& p, const WorkItem& w, std::int64_t i_local, std::int64_t j_local) {
    const std::int64_t* ms = p.mask_stride;
    return p.mask[w.mask_batch * ms[0] + w.head * ms[1] + i_local * ms[2] + j_local * ms[3]] != 0;
  }

  // Whether some query row [0, rows) of the block keeps some key [j0, j0 + n) under the mask and the
  // causal cut. A tile that none keeps is skipped: computing it would only add zero probabilities.
  static bool block_keeps_any_key(const DenseTileParams& p, const WorkItem& w, std::int64_t rows, std::int64_t j0,
                                  std::int64_t n) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = w.q_local + r;
      const std::int64_t end = p.causal ? smaller(j0 + n, i + 1) : j0 + n;
      for (std::int64_t j = j0; j < end; ++j)
        if (mask_keeps(p, w, i, j)) return true;
    }
    return false;
  }

  static void run(const DenseTileParams& p, const WorkItem& w, float* ws) {
    const Layout L(p);
    float* qp = ws + L.q_off;
    float* kt = ws + L.kt_off;
    float* vp = ws + L.v_off;
    float* s = ws + L.s_off;
    float* o = ws + L.o_off;
    float* m = ws + L.m_off;
    float* l = ws + L.l_off;
    float* alpha = ws + L.alpha_off;
    float* key_bias = ws + L.bias_off;

    const std::int64_t d = L.d, dv = p.head_size_v, rows = w.q_rows;
    const std::int64_t rows_pad = round_up(rows, MR);
    const std::int64_t head_kv = w.head / (p.heads_q / p.heads_kv);
    const bool row_invariant_mask = p.mask != nullptr && p.mask_stride[2] == 0;
    const bool per_row_mask = p.mask != nullptr && !row_invariant_mask;

    // Q block, scaled into base-2 logits; padded rows are zero.
    for (std::int64_t r = 0; r < rows_pad; ++r) {
      float* dst = qp + r * d;
      if (r < rows) {
        const std::int64_t off = w.batch * p.q_stride[0] + (w.q_begin + r) * p.q_stride[1] + w.head * p.q_stride[2];
        load_row(p.q, p.elem, off, p.q_stride[3], d, dst);
        for (std::int64_t e = 0; e < d; ++e) dst[e] *= p.scale_log2;
      } else {
        std::memset(dst, 0, static_cast<std::size_t>(d) * sizeof(float));
      }
    }
    std::memset(o, 0, static_cast<std::size_t>(rows_pad * L.dv_pad) * sizeof(float));
    std::memset(vp, 0, static_cast<std::size_t>(L.bk * L.dv_pad) * sizeof(float));
    for (std::int64_t r = 0; r < rows_pad; ++r) {
      m[r] = kNegInf;
      l[r] = 0.0f;
    }

    // Top-left causal: query i sees keys j <= i, so keys past the block's last row are never needed.
    const std::int64_t kv_end = p.causal ? smaller(w.kv_len, w.q_local + rows) : w.kv_len;
    float row_buf[1024];  // one K/V row as fp32 (head sizes <= 512, checked by validation)

    // Dense: every key tile in order. Block-sparse: the query tile's listed key tiles, ascending,
    // so that with every tile listed the arithmetic is the dense path's, operation for operation.
    const std::int64_t key_tile = p.block_k;
    const std::int32_t* listed = nullptr;
    std::int64_t tiles = (kv_end + key_tile - 1) / key_tile;
    if (p.sparse_offsets != nullptr) {
      const std::int64_t r = (w.batch * p.heads_q + w.head) * p.sparse_q_tiles + w.q_local / p.block_q;
      listed = p.sparse_indices + p.sparse_offsets[r];
      tiles = p.sparse_offsets[r + 1] - p.sparse_offsets[r];
    }
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t j0 = (listed != nullptr ? listed[t] : t) * key_tile;
      if (j0 >= kv_end) break;  // causal: this tile and the later ones lie past the block's last row
      std::int64_t n = smaller(key_tile, kv_end - j0);
      if (p.sparse_tile_rows != nullptr) n = smaller(n, p.sparse_tile_rows[j0 / key_tile]);  // padding keys follow
      const std::int64_t n_pad = round_up(n, NR);

      bool bias_needed = false;
      if (row_invariant_mask) {
        bool any_kept = false;
        for (std::int64_t c = 0; c < n; ++c) {
          const bool keep = mask_keeps(p, w, 0, j0 + c);
          key_bias[c] = keep ? 0.0f : kNegInf;
          any_kept |= keep;
          bias_needed |= !keep;
        }
        for (std::int64_t c = n; c < n_pad; ++c) key_bias[c] = kNegInf;
        if (!any_kept) continue;  // a tile of padding keys contributes nothing
      }
      if (per_row_mask && !block_keeps_any_key(p, w, rows, j0, n)) continue;

      // K tile, transposed into panels of NR keys: kt[panel][k][lane].
      for (std::int64_t c = 0; c < n_pad; ++c) {
        float* panel = kt + (c / NR) * d * NR + (c % NR);
        if (c < n) {
          const std::int64_t off = w.batch * p.k_stride[0] + (w.kv_begin + j0 + c) * p.k_stride[1] +
                                   head_kv * p.k_stride[2];
          load_row(p.k, p.elem, off, p.k_stride[3], d, row_buf);
          for (std::int64_t e = 0; e < d; ++e) panel[e * NR] = row_buf[e];
        } else {
          for (std::int64_t e = 0; e < d; ++e) panel[e * NR] = 0.0f;
        }
      }
      // V tile, row-major; rows past n are zero so that 0-probability keys add exact zeros.
      for (std::int64_t c = 0; c < n_pad; ++c) {
        float* dst = vp + c * L.dv_pad;
        if (c < n) {
          const std::int64_t off = w.batch * p.v_stride[0] + (w.kv_begin + j0 + c) * p.v_stride[1] +
                                   head_kv * p.v_stride[2];
          if (p.v_scale != nullptr) {
            load_e4m3_row(p.v, off, p.v_stride[3], dv, dst);
          } else {
            load_row(p.v, p.elem, off, p.v_stride[3], dv, dst);
          }
        } else {
          std::memset(dst, 0, static_cast<std::size_t>(dv) * sizeof(float));
        }
      }

      for (std::int64_t c0 = 0; c0 < n_pad; c0 += NR)
        for (std::int64_t r0 = 0; r0 < rows_pad; r0 += MR) qk_micro(qp + r0 * d, d, kt + c0 * d, s + r0 * L.bk + c0, L.bk);

      const bool causal_cut = p.causal && j0 + n_pad - 1 > w.q_local;
      for (std::int64_t r = 0; r < rows_pad; ++r) {
        float* srow = s + r * L.bk;
        for (std::int64_t c = n; c < n_pad; ++c) srow[c] = kNegInf;
        if (bias_needed)
          for (std::int64_t c = 0; c < n_pad; c += W) I::store(srow + c, I::add(I::load(srow + c), I::load(key_bias + c)));
        if (per_row_mask && r < rows)
          for (std::int64_t c = 0; c < n; ++c)
            if (!mask_keeps(p, w, w.q_local + r, j0 + c)) srow[c] = kNegInf;
        if (causal_cut) {
          const std::int64_t first_hidden = larger(0, w.q_local + r + 1 - j0);
          for (std::int64_t c = first_hidden; c < n; ++c) srow[c] = kNegInf;
        }
        online_softmax_row(srow, n_pad, m[r], l[r], alpha[r]);
      }

      for (std::int64_t r0 = 0; r0 < rows_pad; r0 += MR) {
        const float* prow = s + r0 * L.bk;
        float* orow = o + r0 * L.dv_pad;
        std::int64_t e0 = 0;
        for (; e0 + NR <= L.dv_pad; e0 += NR) pv_micro<NV>(prow, L.bk, n_pad, vp + e0, L.dv_pad, orow + e0, L.dv_pad, alpha + r0);
        for (; e0 < L.dv_pad; e0 += W) pv_micro<1>(prow, L.bk, n_pad, vp + e0, L.dv_pad, orow + e0, L.dv_pad, alpha + r0);
      }
    }

    write_rows(p, w, head_kv, o, L.dv_pad, m, l);
  }

  // One row of one tile: scores (base-2 logits, -inf where masked) become probabilities relative
  // to the running maximum; alpha rescales what was accumulated before.
  static void online_softmax_row(float* srow, std::int64_t n_pad, float& m, float& l, float& alpha) {
    V vmax = I::set1(kNegInf);
    for (std::int64_t c = 0; c < n_pad; c += W) vmax = I::max(vmax, I::load(srow + c));
    const float tile_max = I::reduce_max(vmax);
    const float m_new = m > tile_max ? m : tile_max;
    if (m_new == kNegInf) {  // every key so far is masked: contribute nothing
      alpha = 1.0f;
      std::memset(srow, 0, static_cast<std::size_t>(n_pad) * sizeof(float));
      return;
    }
    alpha = std::exp2(m - m_new);
    const V neg_max = I::set1(-m_new);
    V vsum = I::zero();
    for (std::int64_t c = 0; c < n_pad; c += W) {
      const V pv = I::exp2(I::add(I::load(srow + c), neg_max));
      I::store(srow + c, pv);
      vsum = I::add(vsum, pv);
    }
    l = l * alpha + I::reduce_add(vsum);
    m = m_new;
  }

  // Normalises (and with FP8 V scales) and writes the block; fully masked rows get zeros and LSE -inf.
  static void write_rows(const DenseTileParams& p, const WorkItem& w, std::int64_t head_kv, const float* o,
                         std::int64_t ldo, const float* m, const float* l) {
    const float* v_scale =
        p.v_scale == nullptr ? nullptr : p.v_scale + (w.mask_batch * p.heads_kv + head_kv) * p.head_size_v;
    constexpr float kLn2 = 0.6931471805599453f;
    for (std::int64_t r = 0; r < w.q_rows; ++r) {
      const bool empty = !(l[r] > 0.0f);
      const float inv = empty ? 0.0f : 1.0f / l[r];
      const std::int64_t row = w.q_begin + r;
      const std::int64_t base = w.batch * p.out_stride[0] + row * p.out_stride[1] + w.head * p.out_stride[2];
      for (std::int64_t e = 0; e < p.head_size_v; ++e) {
        const float value = o[r * ldo + e] * inv;
        store_value(p.out, p.elem, base + e * p.out_stride[3], v_scale == nullptr ? value : value * v_scale[e]);
      }
      if (p.lse != nullptr) {
        const float value = empty ? kNegInf : (m[r] + std::log2(l[r])) * kLn2;
        p.lse[w.batch * p.lse_stride[0] + w.head * p.lse_stride[1] + row * p.lse_stride[2]] = value;
      }
    }
  }

  static TileKernel kernel(const char* isa) {
    TileKernel k;
    k.isa = isa;
    k.workspace_floats = &workspace_floats;
    k.run = &run;
    return k;
  }
};

}  // namespace diffattn::cpu
