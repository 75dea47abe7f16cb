#pragma once
// The naive attention oracle: every score materialised, two-pass softmax. In float64 it is the
// ground truth; in "same precision" it is the plain computation a backend is measured against
// (inputs, scores, probabilities and output rounded to the input dtype, fp32 sums), as
// FlashAttention-3's tests do. Fully masked rows give zeros and LSE -inf.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "diffattn/problem.h"
#include "parity/host_tensors.h"

namespace diffattn::testing {

enum class OraclePrecision { kFloat64, kSameAsInputs };

struct OracleOutput {
  std::int64_t batch = 0, seq_q = 0, heads = 0, head_size_v = 0;
  std::vector<double> out;  // [B, Sq, Hq, Dv] as the out view indexes it (packed: B = 1)
  std::vector<double> lse;  // [B, Hq, Sq], natural log

  double& at(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t e) {
    return out[static_cast<std::size_t>(((b * seq_q + i) * heads + h) * head_size_v + e)];
  }
  double& lse_at(std::int64_t b, std::int64_t h, std::int64_t i) {
    return lse[static_cast<std::size_t>((b * heads + h) * seq_q + i)];
  }
};

struct OracleSequence {
  std::int64_t batch, mask_batch, q_begin, q_len, kv_begin, kv_len;
};

inline std::vector<OracleSequence> oracle_sequences(const AttentionProblem& p) {
  std::vector<OracleSequence> seqs;
  if (!p.is_varlen()) {
    for (std::int64_t b = 0; b < p.q.size(0); ++b) seqs.push_back({b, b, 0, p.q.size(1), 0, p.k.size(1)});
    return seqs;
  }
  const TensorView& cq = *p.cu_seqlens_q;
  const TensorView& ck = *p.cu_seqlens_k;
  for (std::int64_t b = 0; b + 1 < cq.size(0); ++b) {
    const auto q0 = static_cast<std::int64_t>(read_element(cq, b * cq.stride(0)));
    const auto q1 = static_cast<std::int64_t>(read_element(cq, (b + 1) * cq.stride(0)));
    const auto k0 = static_cast<std::int64_t>(read_element(ck, b * ck.stride(0)));
    const auto k1 = static_cast<std::int64_t>(read_element(ck, (b + 1) * ck.stride(0)));
    seqs.push_back({0, b, q0, q1 - q0, k0, k1 - k0});
  }
  return seqs;
}

inline bool oracle_mask_keeps(const AttentionProblem& p, std::int64_t b, std::int64_t h, std::int64_t i,
                              std::int64_t j) {
  if (!p.mask) return true;
  const TensorView& m = *p.mask;
  if (m.ndim == 2) return read_element(m, element_offset(m, {m.size(0) == 1 ? 0 : b, j})) != 0.0;
  const std::int64_t mb = m.size(0) == 1 ? 0 : b, mh = m.size(1) == 1 ? 0 : h;
  return read_element(m, element_offset(m, {mb, mh, i, j})) != 0.0;
}

// kSame: OraclePrecision::kSameAsInputs (a compile-time choice, so the float64 loops carry no
// rounding branches).
template <bool kSame>
OracleOutput reference_attention_in(const AttentionProblem& p) {
  const DType dt = p.q.dtype;
  auto r = [&](double x) {
    if constexpr (kSame) return round_to(dt, x);
    else return x;
  };
  // fp32 arithmetic for the plain computation's sums, as a same-precision GEMM accumulates.
  auto acc = [](double x) {
    if constexpr (kSame) return static_cast<double>(static_cast<float>(x));
    else return x;
  };

  OracleOutput o;
  o.batch = p.q.size(0);
  o.seq_q = p.q.size(1);
  o.heads = p.q.size(2);
  o.head_size_v = p.v.size(3);
  const std::int64_t d = p.q.size(3), dv = o.head_size_v;
  o.out.assign(static_cast<std::size_t>(o.batch * o.seq_q * o.heads * dv), 0.0);
  o.lse.assign(static_cast<std::size_t>(o.batch * o.heads * o.seq_q), -std::numeric_limits<double>::infinity());
  const double scale = p.softmax_scale();
  const std::int64_t group = p.q.size(2) / p.k.size(2);

  // Each (sequence, head) is one work item on its own thread: its q, k and v are read into doubles
  // once (the values read_element gives), so the loops below run on plain arrays; the arithmetic
  // and its order within a row are those of the plain definition, and items write disjoint rows.
  const std::vector<OracleSequence> seqs = oracle_sequences(p);
  const std::int64_t items = static_cast<std::int64_t>(seqs.size()) * o.heads;
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    std::vector<double> qs, ks, vs, scores, probs;
    std::vector<bool> kept;
    for (std::int64_t item = next++; item < items; item = next++) {
      const OracleSequence& s = seqs[static_cast<std::size_t>(item / o.heads)];
      const std::int64_t h = item % o.heads;
      const std::int64_t hk = h / group;
      qs.resize(static_cast<std::size_t>(s.q_len * d));
      ks.resize(static_cast<std::size_t>(s.kv_len * d));
      vs.resize(static_cast<std::size_t>(s.kv_len * dv));
      for (std::int64_t i = 0; i < s.q_len; ++i)
        for (std::int64_t e = 0; e < d; ++e)
          qs[static_cast<std::size_t>(i * d + e)] = read_element(p.q, element_offset(p.q, {s.batch, s.q_begin + i, h, e}));
      for (std::int64_t j = 0; j < s.kv_len; ++j) {
        for (std::int64_t e = 0; e < d; ++e)
          ks[static_cast<std::size_t>(j * d + e)] =
              read_element(p.k, element_offset(p.k, {s.batch, s.kv_begin + j, hk, e}));
        for (std::int64_t e = 0; e < dv; ++e)
          vs[static_cast<std::size_t>(j * dv + e)] =
              read_element(p.v, element_offset(p.v, {s.batch, s.kv_begin + j, hk, e}));
      }
      scores.resize(static_cast<std::size_t>(s.kv_len));
      probs.resize(static_cast<std::size_t>(s.kv_len));
      kept.resize(static_cast<std::size_t>(s.kv_len));
      for (std::int64_t i = 0; i < s.q_len; ++i) {
        const std::int64_t qi = s.q_begin + i;
        const double* qrow = qs.data() + i * d;
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          const double* krow = ks.data() + j * d;
          double dot = 0.0;
          for (std::int64_t e = 0; e < d; ++e) dot = acc(dot + qrow[e] * krow[e]);
          const bool keep = (!p.causal || j <= i) && oracle_mask_keeps(p, s.mask_batch, h, i, j);
          kept[static_cast<std::size_t>(j)] = keep;
          scores[static_cast<std::size_t>(j)] = r(acc(dot * scale));
          if (keep) mx = std::max(mx, scores[static_cast<std::size_t>(j)]);
        }
        if (mx == -std::numeric_limits<double>::infinity()) continue;  // zeros, LSE -inf
        double sum = 0.0;
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          auto& sc = scores[static_cast<std::size_t>(j)];
          sc = kept[static_cast<std::size_t>(j)] ? std::exp(sc - mx) : 0.0;
          sum = acc(sum + sc);
        }
        o.lse_at(s.batch, h, qi) = acc(mx + std::log(sum));
        for (std::int64_t j = 0; j < s.kv_len; ++j)
          probs[static_cast<std::size_t>(j)] = r(acc(scores[static_cast<std::size_t>(j)] / sum));
        for (std::int64_t e = 0; e < dv; ++e) {
          double value = 0.0;
          for (std::int64_t j = 0; j < s.kv_len; ++j)
            value = acc(value + probs[static_cast<std::size_t>(j)] * vs[static_cast<std::size_t>(j * dv + e)]);
          o.at(s.batch, qi, h, e) = r(value);
        }
      }
    }
  };
  const auto threads = std::min<std::int64_t>(items, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (std::int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return o;
}

inline OracleOutput reference_attention(const AttentionProblem& p, OraclePrecision precision) {
  return precision == OraclePrecision::kSameAsInputs ? reference_attention_in<true>(p) : reference_attention_in<false>(p);
}

struct Errors {
  double out = 0.0;  // max |out - oracle| (inf when a NaN or an unwritten element shows)
  double lse = 0.0;  // max |lse - oracle| over rows with finite oracle LSE; inf on mismatch of -inf
};

// Compares the views in `p` (as a backend left them) with the oracle output.
inline Errors max_errors(const AttentionProblem& p, OracleOutput& truth) {
  Errors err;
  auto worse = [](double& slot, double e) {
    if (std::isnan(e) || e > slot) slot = std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
  };
  for (std::int64_t b = 0; b < truth.batch; ++b)
    for (std::int64_t i = 0; i < truth.seq_q; ++i)
      for (std::int64_t h = 0; h < truth.heads; ++h)
        for (std::int64_t e = 0; e < truth.head_size_v; ++e)
          worse(err.out, std::fabs(read_element(p.out, element_offset(p.out, {b, i, h, e})) - truth.at(b, i, h, e)));
  if (p.lse) {
    for (std::int64_t b = 0; b < truth.batch; ++b)
      for (std::int64_t h = 0; h < truth.heads; ++h)
        for (std::int64_t i = 0; i < truth.seq_q; ++i) {
          const double got = read_element(*p.lse, element_offset(*p.lse, {b, h, i}));
          const double want = truth.lse_at(b, h, i);
          if (std::isinf(want) || std::isinf(got))
            worse(err.lse, got == want ? 0.0 : std::numeric_limits<double>::infinity());
          else
            worse(err.lse, std::fabs(got - want));
        }
  }
  return err;
}

}  // namespace diffattn::testing
