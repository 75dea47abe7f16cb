#include "kernels/cpu/sage_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/sage_quant_cpu.h"
#include "kernels/cpu/sage_tile_params.h"
#include "kernels/cpu/sdpa_cpu.h"

namespace diffattn::sage {
namespace {

constexpr int kBlockQ = 64;  // query rows per work item (a multiple of kQGroup)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The operands in the layouts the inner loops want, per (batch, kv head): INT8 values widened to
// int16 so the dot products vectorise as multiply-adds, and V as the floats the P*V sum multiplies.
struct Operands {
  QuantizedQ q;
  QuantizedK k;
  std::vector<std::int16_t> q16, k16;  // as q.values, k.values (the reference loops)
  std::vector<float> q_codes;          // as q.values (the tile kernel)
  std::vector<float> qf, kf;           // QkMode::k16: q and k as floats, [B, H, S, D] (padding keys 0)
  float scale_log2 = 0.f;              // QkMode::k16: softmax scale * log2(e), applied to the fp32 score
  std::vector<float> v;                // [B, Hkv, Skv, Dv]: decoded E4M3 (fp8) or float(v) (fp16)
  std::vector<float> v_scales;         // [B, Hkv, Dv]: vs / 448 (fp8) or 1 (fp16)
  std::vector<std::uint8_t> valid;     // [B, Skv]
  std::vector<float> lse_shifts;       // [B, Hq, Sq], log2 units
};

float element(const TensorView& t, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  const auto bits = static_cast<const std::uint16_t*>(t.data)[b * t.stride(0) + s * t.stride(1) + h * t.stride(2) +
                                                             d * t.stride(3)];
  return t.dtype == DType::kFloat16 ? cpu::half_to_float(bits) : cpu::bf16_to_float(bits);
}

// Rounds p to the input dtype (the accurate mode's P).
float round_to_dtype(float p, DType dtype) {
  return dtype == DType::kFloat16 ? cpu::half_to_float(cpu::float_to_half(p)) : cpu::bf16_to_float(cpu::float_to_bf16(p));
}

std::vector<std::int16_t> widened(const std::vector<std::int8_t>& values) {
  return std::vector<std::int16_t>(values.begin(), values.end());
}

void fill_values(const AttentionProblem& p, PvMode pv, Operands& ops) {
  const std::int64_t batch = p.v.size(0), seqlen = p.v.size(1), heads = p.v.size(2), width = p.v.size(3);
  ops.v.assign(static_cast<std::size_t>(batch * heads * seqlen * width), 0.f);
  ops.v_scales.assign(static_cast<std::size_t>(batch * heads * width), 1.f);
  if (pv == PvMode::kFp8) {
    const QuantizedV v = quantize_v(p, ops.valid);
    float decoded[256];
    for (int code = 0; code < 256; ++code) decoded[code] = e4m3_to_float(static_cast<std::uint8_t>(code));
    const auto count = static_cast<std::int64_t>(v.codes.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) ops.v[static_cast<std::size_t>(i)] = decoded[v.codes[static_cast<std::size_t>(i)]];
    for (std::size_t i = 0; i < v.scales.size(); ++i) ops.v_scales[i] = v.scales[i] / kE4m3Max;
    return;
  }
  const std::int64_t pairs = batch * heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t bh = 0; bh < pairs; ++bh)
    for (std::int64_t j = 0; j < seqlen; ++j) {
      if (!ops.valid[static_cast<std::size_t>((bh / heads) * seqlen + j)]) continue;  // padding stays 0
      for (std::int64_t c = 0; c < width; ++c)
        ops.v[static_cast<std::size_t>((bh * seqlen + j) * width + c)] = element(p.v, bh / heads, j, bh % heads, c);
    }
}

// QkMode::k16's operands: the inputs' 16-bit values as floats, heads outermost.
std::vector<float> as_floats(const TensorView& t, const std::vector<std::uint8_t>* valid) {
  const std::int64_t batch = t.size(0), seqlen = t.size(1), heads = t.size(2), width = t.size(3);
  std::vector<float> out(static_cast<std::size_t>(batch * heads * seqlen * width), 0.f);
  const std::int64_t pairs = batch * heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t bh = 0; bh < pairs; ++bh)
    for (std::int64_t j = 0; j < seqlen; ++j) {
      if (valid != nullptr && !(*valid)[static_cast<std::size_t>((bh / heads) * seqlen + j)]) continue;
      for (std::int64_t c = 0; c < width; ++c)
        out[static_cast<std::size_t>((bh * seqlen + j) * width + c)] = element(t, bh / heads, j, bh % heads, c);
    }
  return out;
}

bool all_finite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float x) { return std::isfinite(x); });
}

float largest(const std::vector<float>& values) {
  float m = 0.f;
  for (float x : values) m = std::max(m, std::fabs(x));
  return m;
}

// Scores are an INT32 dot times qs * ks, and P*V sums at most Skv terms of P <= 448 (or 1) times V:
// both must stay inside float32, which only inputs near the dtype's largest values break.
Status check_operands_fit_float32(const AttentionProblem& p, PvMode pv, const Operands& ops) {
  const float score_bound = largest(ops.q.scales) * largest(ops.k.scales) * kInt8Max * kInt8Max *
                            static_cast<float>(ops.q.head_size);
  if (!all_finite(ops.q.scales) || !all_finite(ops.k.means) || !all_finite(ops.k.scales) || !std::isfinite(score_bound))
    return InvalidInput("SAGE_ATTN: q and k are too large for float32 scores after scaling by the softmax scale (the "
                        "quantization scales or the mean of k overflow); scale q and k down (e.g. normalise them) "
                        "before the call");
  const float p_max = pv == PvMode::kFp8 ? kE4m3Max * kE4m3Max : largest(ops.v);
  if (!std::isfinite(p_max * static_cast<float>(p.v.size(1))))
    return InvalidInput("SAGE_ATTN: v is too large for float32 output sums over " + std::to_string(p.v.size(1)) +
                        " keys; scale v down before the call and the output up after it");
  return Status::Ok();
}

struct WorkItem {
  std::int64_t batch, head, q_begin, q_rows;
};

// The running state of kBlockQ query rows, and the scratch of one key block.
struct RowState {
  std::vector<float> m, l, o, acc, s;
  std::vector<int> s_valid;
  explicit RowState(std::int64_t dv)
      : m(kBlockQ), l(kBlockQ), o(static_cast<std::size_t>(kBlockQ * dv)), acc(static_cast<std::size_t>(kBlockQ * dv)),
        s(static_cast<std::size_t>(kBlockQ * kKvBlock)) {}
};

[[gnu::always_inline]] inline std::int32_t dot_i32(const std::int16_t* a, const std::int16_t* b, std::int64_t n) {
  std::int32_t sum = 0;
  for (std::int64_t d = 0; d < n; ++d) sum += static_cast<std::int32_t>(a[d]) * static_cast<std::int32_t>(b[d]);
  return sum;
}

// Normalises an item's rows (o / l, times V's scales) into the output, and the LSE with the
// smoothing shift added back; rows whose keys are all masked get 0 and LSE -inf.
void store_rows(const AttentionProblem& p, const Operands& ops, const WorkItem& w, std::int64_t kv_head,
                const float* o_rows, const float* m, const float* l_rows) {
  const std::int64_t dv = p.v.size(3);
  const float* v_scale = ops.v_scales.data() + (w.batch * p.k.size(2) + kv_head) * dv;
  const TensorView& out = p.out;
  auto* dst = static_cast<std::uint16_t*>(out.data);
  // The shifts exist only when the call asks for the LSE.
  const float* shift = ops.lse_shifts.empty()
                           ? nullptr
                           : ops.lse_shifts.data() + (w.batch * p.q.size(2) + w.head) * p.q.size(1) + w.q_begin;
  for (std::int64_t r = 0; r < w.q_rows; ++r) {
    const std::int64_t i = w.q_begin + r;
    const float l = l_rows[r];
    const float* o = o_rows + r * dv;
    for (std::int64_t c = 0; c < dv; ++c) {
      const float value = l == 0.f ? 0.f : o[c] * v_scale[c] / l;
      dst[w.batch * out.stride(0) + i * out.stride(1) + w.head * out.stride(2) + c * out.stride(3)] =
          out.dtype == DType::kFloat16 ? cpu::float_to_half(value) : cpu::float_to_bf16(value);
    }
    if (p.lse) {
      const TensorView& lse = *p.lse;
      static_cast<float*>(lse.data)[w.batch * lse.stride(0) + w.head * lse.stride(1) + i * lse.stride(2)] =
          l == 0.f ? kNegInf : (m[r] + std::log2(l) + (shift != nullptr ? shift[r] : 0.f)) * 0.6931471805599453f;
    }
  }
}

class ItemRunner {
 public:
  // `layout`: the block-sparse walk over its lists (kKvBlock x kKvBlock tiles), else every key block.
  ItemRunner(const AttentionProblem& p, PvMode pv, QkMode qk, const Operands& ops,
             const BlockSparseLayout* layout = nullptr)
      : p_(p), pv_(pv), qk_(qk), ops_(ops), layout_(layout), d_(p.q.size(3)), dv_(p.v.size(3)), skv_(p.k.size(1)),
        group_(p.q.size(2) / p.k.size(2)) {}

  [[gnu::always_inline]] void run(const WorkItem& w, RowState& st) const {
    std::fill(st.m.begin(), st.m.end(), kNegInf);
    std::fill(st.l.begin(), st.l.end(), 0.f);
    std::fill(st.o.begin(), st.o.end(), 0.f);
    const std::int64_t kv_head = w.head / group_;
    if (layout_ != nullptr) {
      // The query tile's listed key blocks, each up to its tile's valid rows.
      const BlockSparseLayout& l = *layout_;
      const std::int64_t row = l.row(w.batch, w.head, w.q_begin / kKvBlock);
      const auto r = static_cast<std::size_t>(row);
      for (std::int32_t at = l.offsets[r]; at < l.offsets[r + 1]; ++at) {
        const std::int64_t tile = l.indices[static_cast<std::size_t>(at)], j0 = tile * kKvBlock;
        const std::int64_t rows = l.tile_rows.empty() ? kKvBlock : l.tile_rows[static_cast<std::size_t>(tile)];
        const std::int64_t keys = std::min(skv_, j0 + rows) - j0;
        if (keys <= 0) continue;
        scores(w, kv_head, j0, keys, st);
        softmax_and_pv(w, kv_head, j0, keys, st);
      }
      store(w, kv_head, st);
      return;
    }
    // Causal (top-left): the block's last row sees keys up to its own index.
    const std::int64_t kv_end = p_.causal ? std::min(skv_, w.q_begin + w.q_rows) : skv_;
    for (std::int64_t j0 = 0; j0 < kv_end; j0 += kKvBlock) {
      const std::int64_t keys = std::min<std::int64_t>(kKvBlock, skv_ - j0);
      scores(w, kv_head, j0, keys, st);
      softmax_and_pv(w, kv_head, j0, keys, st);
    }
    store(w, kv_head, st);
  }

 private:
  [[gnu::always_inline]] void scores(const WorkItem& w, std::int64_t kv_head, std::int64_t j0, std::int64_t keys, RowState& st) const {
    if (qk_ == QkMode::k16) {
      const std::int64_t qh = w.batch * p_.q.size(2) + w.head, kh = w.batch * p_.k.size(2) + kv_head;
      fill_scores(w, j0, keys, st, [&](std::int64_t i, std::int64_t j) {
        const float* q = ops_.qf.data() + (qh * p_.q.size(1) + i) * d_;
        const float* k = ops_.kf.data() + (kh * skv_ + j) * d_;
        float dot = 0.f;
        for (std::int64_t c = 0; c < d_; ++c) dot += q[c] * k[c];
        return dot * ops_.scale_log2;
      });
      return;
    }
    const std::int64_t qh = w.batch * ops_.q.heads + w.head, kh = w.batch * ops_.k.heads + kv_head;
    fill_scores(w, j0, keys, st, [&](std::int64_t i, std::int64_t j) {
      const std::int16_t* q = ops_.q16.data() + (qh * ops_.q.seqlen + i) * d_;
      const std::int16_t* k = ops_.k16.data() + (kh * skv_ + j) * d_;
      const float qs = ops_.q.scales[static_cast<std::size_t>(qh * ops_.q.groups() + i / kQGroup)];
      const float ks = ops_.k.scales[static_cast<std::size_t>(kh * ops_.k.groups() + j / kKGroup)];
      return static_cast<float>(dot_i32(q, k, d_)) * (qs * ks);
    });
  }

  // The block's scores, score(i, j) for each row and key; -inf for padding keys and (causal) keys
  // past the row.
  template <typename Score>
  [[gnu::always_inline]] void fill_scores(const WorkItem& w, std::int64_t j0, std::int64_t keys, RowState& st,
                                          const Score& score) const {
    const std::uint8_t* valid = ops_.valid.data() + w.batch * skv_;
    for (std::int64_t r = 0; r < w.q_rows; ++r) {
      const std::int64_t i = w.q_begin + r;
      float* s = st.s.data() + r * kKvBlock;
      for (std::int64_t jj = 0; jj < keys; ++jj) {
        const std::int64_t j = j0 + jj;
        s[jj] = !valid[j] || (p_.causal && j > i) ? kNegInf : score(i, j);
      }
    }
  }

  // The block's softmax row by row (P in place of the scores), then P V over pairs of rows and
  // 32-column chunks whose sums stay in registers across the block's keys: each sum still adds its
  // keys in order, as the row-by-row loop did, at a fraction of its loads and stores.
  [[gnu::always_inline]] void softmax_and_pv(const WorkItem& w, std::int64_t kv_head, std::int64_t j0, std::int64_t keys, RowState& st) const {
    const float* v = ops_.v.data() + ((w.batch * p_.k.size(2) + kv_head) * skv_ + j0) * dv_;
    const DType dtype = p_.q.dtype;
    float alpha[kBlockQ];
    for (std::int64_t r = 0; r < w.q_rows; ++r) {
      float* s = st.s.data() + r * kKvBlock;
      float block_max = kNegInf;
      for (std::int64_t jj = 0; jj < keys; ++jj) block_max = std::max(block_max, s[jj]);
      const float m_new = std::max(st.m[r], block_max);
      if (m_new == kNegInf) {  // every key so far is masked: nothing to add
        std::fill(s, s + keys, 0.f);
        alpha[r] = 1.f;
        continue;
      }
      alpha[r] = st.m[r] == kNegInf ? 1.f : std::exp2(st.m[r] - m_new);
      float row_sum = 0.f;
      for (std::int64_t jj = 0; jj < keys; ++jj) {
        const float p = s[jj] == kNegInf ? 0.f : std::exp2(s[jj] - m_new);
        const float pq = pv_ == PvMode::kFp8 ? e4m3_round(p * kE4m3Max) : round_to_dtype(p, dtype);
        // FP8: the sum of the E4M3 values that multiply V (the GPU's P V product sums them with a
        // column of ones), so numerator and denominator share P's rounding; FP16: of p itself.
        row_sum += pv_ == PvMode::kFp8 ? pq * (1.f / kE4m3Max) : p;
        s[jj] = pq;
      }
      st.l[r] = st.l[r] * alpha[r] + row_sum;
      st.m[r] = m_new;
    }
    static_assert(kBlockQ % 2 == 0, "rows go in pairs");
    constexpr int kChunk = 32;
    for (std::int64_t r = 0; r < w.q_rows; r += 2) {
      const bool pair = r + 1 < w.q_rows;
      const float* p0 = st.s.data() + r * kKvBlock;
      const float* p1 = pair ? p0 + kKvBlock : p0;
      for (std::int64_t c0 = 0; c0 < dv_; c0 += kChunk) {
        // Whole chunks with a constant width (the loop the compiler keeps in registers); a head
        // size that is not a multiple of kChunk ends with a narrower one.
        const int width = static_cast<int>(std::min<std::int64_t>(kChunk, dv_ - c0));
        float a0[kChunk] = {}, a1[kChunk] = {};
        if (width == kChunk) {
          for (std::int64_t jj = 0; jj < keys; ++jj) {
            const float x0 = p0[jj], x1 = pair ? p1[jj] : 0.f;
            if (x0 == 0.f && x1 == 0.f) continue;
            const float* vj = v + jj * dv_ + c0;
            for (int c = 0; c < kChunk; ++c) {
              a0[c] += x0 * vj[c];
              a1[c] += x1 * vj[c];
            }
          }
        } else {
          for (std::int64_t jj = 0; jj < keys; ++jj) {
            const float x0 = p0[jj], x1 = pair ? p1[jj] : 0.f;
            if (x0 == 0.f && x1 == 0.f) continue;
            const float* vj = v + jj * dv_ + c0;
            for (int c = 0; c < width; ++c) {
              a0[c] += x0 * vj[c];
              a1[c] += x1 * vj[c];
            }
          }
        }
        float* o0 = st.o.data() + r * dv_ + c0;
        for (int c = 0; c < width; ++c) o0[c] = o0[c] * alpha[r] + a0[c];
        if (pair) {
          float* o1 = o0 + dv_;
          for (int c = 0; c < width; ++c) o1[c] = o1[c] * alpha[r + 1] + a1[c];
        }
      }
    }
  }

  void store(const WorkItem& w, std::int64_t kv_head, const RowState& st) const {
    store_rows(p_, ops_, w, kv_head, st.o.data(), st.m.data(), st.l.data());
  }

  const AttentionProblem& p_;
  PvMode pv_;
  QkMode qk_;
  const Operands& ops_;
  const BlockSparseLayout* layout_;
  std::int64_t d_, dv_, skv_, group_;
};

// The inner loops are plain C++; an AVX2 clone lets the compiler vectorise them 8 wide where the
// CPU has it (the run-time loader picks the clone).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void run_item(const ItemRunner& runner, const WorkItem& item, RowState& state) {
  runner.run(item, state);
}

std::vector<WorkItem> work_items(const AttentionProblem& p) {
  std::vector<WorkItem> items;
  for (std::int64_t b = 0; b < p.q.size(0); ++b)
    for (std::int64_t h = 0; h < p.q.size(2); ++h)
      for (std::int64_t q0 = 0; q0 < p.q.size(1); q0 += kBlockQ)
        items.push_back({b, h, q0, std::min<std::int64_t>(kBlockQ, p.q.size(1) - q0)});
  return items;
}

Status check_runs_here(const AttentionProblem& p) {
  if (p.q.device.kind != DeviceKind::kCpu)
    return Internal("run_sage_attn_cpu was given tensors on a CUDA device; route them to run_sage_attn_cuda");
  if (p.q.dtype != DType::kFloat16 && p.q.dtype != DType::kBFloat16)
    return Unsupported("SAGE_ATTN takes float16 or bfloat16 q, k and v, got " + std::string(dtype_name(p.q.dtype)) +
                       "; convert them, or select TORCH_SDPA");
  if (p.v.size(3) != p.q.size(3))
    return Unsupported("SAGE_ATTN needs the value head size to equal the query head size (got " +
                       std::to_string(p.v.size(3)) + " and " + std::to_string(p.q.size(3)) + "); select TORCH_SDPA");
  if (p.mask_kind() == MaskKind::kDense)
    return Unsupported("SAGE_ATTN takes key-padding masks [B, Skv] only, not dense masks; select TORCH_SDPA");
  if (p.is_varlen())
    return Unsupported("SAGE_ATTN does not take packed variable-length batches; pad them and pass a key-padding "
                       "mask, or select TORCH_SDPA");
  return Status::Ok();
}

// The items, with a padded layout's rows past its tiles' valid rows dropped (they are not written).
std::vector<WorkItem> items_to_run(const AttentionProblem& problem, const BlockSparseLayout* layout) {
  std::vector<WorkItem> items = work_items(problem);
  if (layout == nullptr || layout->tile_rows.empty()) return items;
  std::vector<WorkItem> valid;
  for (WorkItem w : items) {
    const std::int64_t t = w.q_begin / kKvBlock;
    const std::int64_t end = t * kKvBlock + layout->tile_rows[static_cast<std::size_t>(t)];
    w.q_rows = std::min(w.q_rows, end - w.q_begin);
    if (w.q_rows > 0) valid.push_back(w);
  }
  return valid;
}

// The reference: the plain loops of ItemRunner.
void run_reference_items(const AttentionProblem& problem, const ItemRunner& runner, const BlockSparseLayout* layout) {
  const std::vector<WorkItem> items = items_to_run(problem, layout);
  const auto count = static_cast<std::int64_t>(items.size());
#pragma omp parallel
  {
    RowState state(problem.v.size(3));
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < count; ++i) run_item(runner, items[static_cast<std::size_t>(i)], state);
  }
}

cpu::SageTileKernel sage_tile_kernel(CpuIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == CpuIsa::kAvx512) return cpu::avx512_sage_tile_kernel();
  if (isa == CpuIsa::kAvx2) return cpu::avx2_sage_tile_kernel();
#endif
  return cpu::portable_sage_tile_kernel();
}

// Whether the tile kernel takes the problem: value widths of whole vectors of every instruction
// set, and head sizes whose INT8 dot products stay exact in float32 (127 * 127 * D < 2^24).
bool tiles_take(const AttentionProblem& p) {
  return p.v.size(3) % 16 == 0 && p.q.size(3) <= 1024;
}

// K's rows [pairs, Skv, D] (INT8 codes or 16-bit values) as floats in the kernel's panels: for
// each (batch, kv head) pair, ceil(Skv / keys) panels of [D, keys], keys past Skv 0.
template <typename T>
std::vector<float> k_panels(const std::vector<T>& k, std::int64_t pairs, std::int64_t skv, std::int64_t d, int keys) {
  const std::int64_t panels = (skv + keys - 1) / keys;
  std::vector<float> out(static_cast<std::size_t>(pairs * panels * d * keys), 0.f);
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < pairs; ++bh)
    for (std::int64_t j = 0; j < skv; ++j) {
      const T* row = k.data() + (bh * skv + j) * d;
      float* panel = out.data() + ((bh * panels + j / keys) * d) * keys + j % keys;
      for (std::int64_t e = 0; e < d; ++e) panel[e * keys] = static_cast<float>(row[e]);
    }
  return out;
}

// The tile kernel of `isa` over the items: the same quantized operands, scores and roundings as the
// reference, the sums in other orders.
void run_tile_items(const AttentionProblem& problem, PvMode pv, QkMode qk, const Operands& ops,
                    const BlockSparseLayout* layout, CpuIsa isa) {
  cpu::SageTileParams tp;
  const bool int8 = qk == QkMode::kInt8;
  tp.q = int8 ? ops.q_codes.data() : ops.qf.data();  // the INT8 codes as floats: exact
  tp.q_scales = int8 ? ops.q.scales.data() : nullptr;
  const cpu::SageTileKernel kernel = sage_tile_kernel(isa);
  const std::int64_t pairs = problem.k.size(0) * problem.k.size(2);
  const std::vector<float> panels =
      int8 ? k_panels(ops.k.values, pairs, problem.k.size(1), problem.k.size(3), kernel.panel_keys)
           : k_panels(ops.kf, pairs, problem.k.size(1), problem.k.size(3), kernel.panel_keys);
  tp.k_panels = panels.data();
  tp.k_scales = int8 ? ops.k.scales.data() : nullptr;
  tp.v = ops.v.data();
  tp.valid = ops.valid.data();
  tp.heads_q = problem.q.size(2), tp.heads_kv = problem.k.size(2);
  tp.sq = problem.q.size(1), tp.skv = problem.k.size(1), tp.d = problem.q.size(3), tp.dv = problem.v.size(3);
  tp.k_group = kKGroup, tp.kv_block = kKvBlock, tp.block_q = kBlockQ;
  tp.score_scale = int8 ? 1.f : ops.scale_log2;
  tp.causal = problem.causal;
  tp.rounding = pv == PvMode::kFp8                       ? cpu::PRounding::kE4m3
                : problem.q.dtype == DType::kFloat16 ? cpu::PRounding::kF16
                                                         : cpu::PRounding::kBf16;
  if (layout != nullptr) {
    tp.sparse_offsets = layout->offsets.data();
    tp.sparse_indices = layout->indices.data();
    tp.sparse_tile_rows = layout->tile_rows.empty() ? nullptr : layout->tile_rows.data();
    tp.sparse_q_tiles = layout->q_tiles;
  }
  const std::vector<WorkItem> items = items_to_run(problem, layout);
  const auto count = static_cast<std::int64_t>(items.size());
  static_assert(kBlockQ + 16 <= cpu::kSageTileMaxRows, "an item's rows fit the tile kernel's buffers");
  const std::size_t rows = kBlockQ + 16;  // the kernel's rows rounded up to its micro-kernel's
#pragma omp parallel
  {
    std::vector<float> workspace(kernel.workspace_floats(tp)), o(rows * static_cast<std::size_t>(tp.dv));
    std::vector<float> m(rows), l(rows);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < count; ++i) {
      const WorkItem& w = items[static_cast<std::size_t>(i)];
      const cpu::SageItem item{w.batch, w.head, w.q_begin, w.q_rows};
      kernel.run(tp, item, workspace.data(), o.data(), m.data(), l.data());
      store_rows(problem, ops, w, w.head / (problem.q.size(2) / problem.k.size(2)), o.data(), m.data(), l.data());
    }
  }
}

void run_items(const AttentionProblem& problem, PvMode pv, QkMode qk, Operands& ops, const BlockSparseLayout* layout,
               SageCpuKernel which) {
  if (which.reference || !tiles_take(problem)) {
    if (qk == QkMode::kInt8) {
      ops.q16 = widened(ops.q.values);
      ops.k16 = widened(ops.k.values);
    }
    run_reference_items(problem, ItemRunner(problem, pv, qk, ops, layout), layout);
    return;
  }
  if (qk == QkMode::kInt8) ops.q_codes.assign(ops.q.values.begin(), ops.q.values.end());
  run_tile_items(problem, pv, qk, ops, layout, which.isa.value_or(default_cpu_isa()));
}

// QkMode::k16: fp32 scores of the 16-bit q and k, then the same softmax and P*V as SAGE_ATTN's.
Status run_qk16(const AttentionProblem& problem, PvMode pv, Operands& ops, SageCpuKernel which) {
  ops.qf = as_floats(problem.q, nullptr);
  ops.kf = as_floats(problem.k, &ops.valid);
  ops.scale_log2 = problem.softmax_scale() * 1.4426950408889634f;
  fill_values(problem, pv, ops);
  const float p_max = pv == PvMode::kFp8 ? kE4m3Max * kE4m3Max : largest(ops.v);
  if (!std::isfinite(p_max * static_cast<float>(problem.v.size(1))))
    return InvalidInput("v is too large for float32 output sums over " + std::to_string(problem.v.size(1)) +
                        " keys; scale v down before the call and the output up after it");
  run_items(problem, pv, QkMode::k16, ops, nullptr, which);
  return Status::Ok();
}

// The INT8 Q*K^T operands, V and the LSE shifts (ops.valid set), checked to fit float32.
Status quantize_operands(const AttentionProblem& problem, PvMode pv, Operands& ops) {
  ops.q = quantize_q(problem);
  ops.k = quantize_k(problem, ops.valid);
  fill_values(problem, pv, ops);
  DIFFATTN_RETURN_IF_ERROR(check_operands_fit_float32(problem, pv, ops));
  if (problem.lse) ops.lse_shifts = lse_shifts(problem, ops.k);
  return Status::Ok();
}

Status check_kernel_runs_here(SageCpuKernel which) {
  if (which.isa && !cpu_isa_available(*which.isa))
    return Unsupported("SAGE_ATTN's " + std::string(cpu_isa_name(*which.isa)) +
                       " CPU kernel cannot run on this CPU or build; leave the instruction set to the run-time choice");
  return Status::Ok();
}

}  // namespace

Status run_sage_block_sparse_cpu(const AttentionProblem& problem, const BlockSparseLayout& layout, PvMode pv,
                                 SageCpuKernel which) {
  DIFFATTN_RETURN_IF_ERROR(check_runs_here(problem));
  DIFFATTN_RETURN_IF_ERROR(check_kernel_runs_here(which));
  static_assert(kKvBlock % kBlockQ == 0, "a work item lies in one query tile");
  if (layout.q_tile != kKvBlock || layout.k_tile != kKvBlock)
    return InvalidInput("SAGE_ATTN's block-sparse walk takes lists of " + std::to_string(kKvBlock) + " x " +
                        std::to_string(kKvBlock) + " tiles, got " + std::to_string(layout.q_tile) + " x " +
                        std::to_string(layout.k_tile));
  if (problem.causal || problem.mask)
    return Unsupported("SAGE_ATTN's block-sparse walk takes no causal or key-masked problem; express such keys in the "
                       "block lists");
  DIFFATTN_RETURN_IF_ERROR(check_block_sparse_layout(layout, problem.q.size(0), problem.q.size(2), problem.q.size(1),
                                                     problem.k.size(1)));
  Operands ops;
  ops.valid = valid_keys(problem);
  DIFFATTN_RETURN_IF_ERROR(quantize_operands(problem, pv, ops));
  run_items(problem, pv, QkMode::kInt8, ops, &layout, which);
  return Status::Ok();
}

Status run_sage_attn_cpu(const AttentionProblem& problem, PvMode pv, QkMode qk, SageCpuKernel which) {
  DIFFATTN_RETURN_IF_ERROR(check_runs_here(problem));
  DIFFATTN_RETURN_IF_ERROR(check_kernel_runs_here(which));
  Operands ops;
  ops.valid = valid_keys(problem);
  if (qk == QkMode::k16) return run_qk16(problem, pv, ops, which);
  DIFFATTN_RETURN_IF_ERROR(quantize_operands(problem, pv, ops));
  run_items(problem, pv, QkMode::kInt8, ops, nullptr, which);
  return Status::Ok();
}

}  // namespace diffattn::sage
