#include "kernels/cpu/fp8_v_cpu.h"

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/quant/fp8_e4m3.h"

namespace diffattn {
namespace {

struct SequenceRange {
  std::int64_t batch, q_len, kv_begin, kv_len;
};

std::vector<SequenceRange> sequence_ranges(const AttentionProblem& p) {
  std::vector<SequenceRange> seqs;
  if (!p.is_varlen()) {
    for (std::int64_t b = 0; b < p.q.size(0); ++b) seqs.push_back({b, p.q.size(1), 0, p.k.size(1)});
    return seqs;
  }
  const auto* cq = static_cast<const std::int32_t*>(p.cu_seqlens_q->data);
  const auto* ck = static_cast<const std::int32_t*>(p.cu_seqlens_k->data);
  const std::int64_t sq = p.cu_seqlens_q->stride(0), sk = p.cu_seqlens_k->stride(0);
  for (std::int64_t s = 0; s + 1 < p.cu_seqlens_q->size(0); ++s)
    seqs.push_back({0, cq[(s + 1) * sq] - cq[s * sq], ck[s * sk], ck[(s + 1) * sk] - ck[s * sk]});
  return seqs;
}

bool keeps(const TensorView& mask, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  const auto* m = static_cast<const std::uint8_t*>(mask.data);
  const std::int64_t mb = mask.size(0) == 1 ? 0 : b;
  if (mask.ndim == 2) return m[mb * mask.stride(0) + j * mask.stride(1)] != 0;
  const std::int64_t mh = mask.size(1) == 1 ? 0 : h;
  return m[mb * mask.stride(0) + mh * mask.stride(1) + i * mask.stride(2) + j * mask.stride(3)] != 0;
}

// Whether some row of query heads [h0, h0 + group) sees key j of sequence `seq`.
bool key_seen(const AttentionProblem& p, const SequenceRange& seq, std::int64_t h0, std::int64_t group,
              std::int64_t j) {
  const std::int64_t rows = p.causal ? seq.q_len - j : seq.q_len;  // causal: rows i >= j see key j
  if (rows <= 0) return false;
  if (!p.mask) return true;
  if (p.mask->ndim == 2) return keeps(*p.mask, seq.batch, 0, 0, j);
  for (std::int64_t h = h0; h < h0 + group; ++h)
    for (std::int64_t i = seq.q_len - rows; i < seq.q_len; ++i)
      if (keeps(*p.mask, seq.batch, h, i, j)) return true;
  return false;
}

float element(const TensorView& t, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  const auto bits = static_cast<const std::uint16_t*>(t.data)[b * t.stride(0) + s * t.stride(1) + h * t.stride(2) +
                                                             d * t.stride(3)];
  return t.dtype == DType::kFloat16 ? cpu::half_to_float(bits) : cpu::bf16_to_float(bits);
}

}  // namespace

std::vector<std::uint8_t> seen_keys(const AttentionProblem& p) {
  const std::vector<SequenceRange> seqs = sequence_ranges(p);
  const std::int64_t heads_kv = p.k.size(2), group = p.q.size(2) / heads_kv;
  std::vector<std::uint8_t> seen;
  for (const SequenceRange& seq : seqs)
    for (std::int64_t g = 0; g < heads_kv; ++g)
      for (std::int64_t j = 0; j < seq.kv_len; ++j) seen.push_back(key_seen(p, seq, g * group, group, j) ? 1 : 0);
  return seen;
}

Fp8Values quantize_v_fp8(const AttentionProblem& p) {
  const std::vector<SequenceRange> seqs = sequence_ranges(p);
  Fp8Values v;
  v.sequences = static_cast<std::int64_t>(seqs.size());
  v.heads = p.v.size(2), v.seqlen = p.v.size(1), v.head_size = p.v.size(3);
  const std::int64_t width = v.head_size;
  v.codes.assign(static_cast<std::size_t>(p.v.size(0) * v.heads * v.seqlen * width), 0);
  v.scales.assign(static_cast<std::size_t>(v.sequences * v.heads * width), 0.f);
  const std::vector<std::uint8_t> seen = seen_keys(p);
  std::vector<std::int64_t> seen_at(seqs.size());  // where each sequence's flags begin
  for (std::size_t s = 0, at = 0; s < seqs.size(); at += static_cast<std::size_t>(v.heads * seqs[s].kv_len), ++s)
    seen_at[s] = static_cast<std::int64_t>(at);
  const std::int64_t pairs = v.sequences * v.heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t sg = 0; sg < pairs; ++sg) {
    const SequenceRange& seq = seqs[static_cast<std::size_t>(sg / v.heads)];
    const std::int64_t g = sg % v.heads;
    std::vector<float> rows(static_cast<std::size_t>(seq.kv_len * width));
    for (std::int64_t j = 0; j < seq.kv_len; ++j)
      for (std::int64_t c = 0; c < width; ++c)
        rows[static_cast<std::size_t>(j * width + c)] = element(p.v, seq.batch, seq.kv_begin + j, g, c);
    std::uint8_t* codes = v.codes.data() + ((seq.batch * v.heads + g) * v.seqlen + seq.kv_begin) * width;
    fp8::quantize_channels_e4m3(rows.data(), seen.data() + seen_at[static_cast<std::size_t>(sg / v.heads)] +
                                                 g * seq.kv_len,
                                seq.kv_len, width, codes, v.scales.data() + sg * width);
  }
  return v;
}

Status run_attention_fp8_v_cpu(const AttentionProblem& problem) {
  const Fp8Values v = quantize_v_fp8(problem);
  Fp8ValuesView view;
  view.codes = v.codes.data();
  view.strides[0] = v.heads * v.seqlen * v.head_size;
  view.strides[1] = v.head_size;
  view.strides[2] = v.seqlen * v.head_size;
  view.strides[3] = 1;
  view.scales = v.scales.data();
  return run_sdpa_cpu(problem, view, default_cpu_isa());
}

}  // namespace diffattn
