// FLASHINFER_ATTN's QK16/V8 mode (quant.dtype_vo = fp8_e4m3) on the CPU, on every parity case the
// backend takes and on padding whose values would ruin the scales: within the 8-bit rule of
// parity/quantized_tolerance.h against the float64 oracle, and within FlashAttention-3's rule
// against a float64 oracle given the same V quantisation (computed here, independently of the
// library: per (sequence, kv head, channel), amax over the keys some query sees, E4M3 round to
// nearest even of v * (448 / amax)).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "kernels/quant/fp8_e4m3.h"
#include "parity/fresh_rng.h"
#include "parity/harness.h"
#include "parity/parity_check.h"

namespace diffattn {
namespace {

using testing::CaseData;
using testing::ParityCase;

struct Sequence {
  std::int64_t batch, q_len, kv_begin, kv_len;
};

std::vector<Sequence> sequences_of(const AttentionProblem& p) {
  std::vector<Sequence> out;
  for (const testing::OracleSequence& s : testing::oracle_sequences(p))
    out.push_back({s.batch, s.q_len, s.kv_begin, s.kv_len});
  return out;
}

// Whether some query row of a head reading kv head g sees key j (local) of sequence s.
bool seen(const AttentionProblem& p, std::int64_t s, const Sequence& seq, std::int64_t g, std::int64_t j) {
  const std::int64_t group = p.q.size(2) / p.k.size(2);
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
    for (std::int64_t i = 0; i < seq.q_len; ++i) {
      if (p.causal && j > i) continue;
      if (testing::oracle_mask_keeps(p, p.is_varlen() ? s : seq.batch, h, i, j)) return true;
    }
  return false;
}

// A float64 copy of V after the QK16/V8 quantisation, and the problem that reads it.
struct DequantisedV {
  testing::HostBuffer buffer;
  AttentionProblem problem;
};

std::unique_ptr<DequantisedV> dequantised_v(const AttentionProblem& p) {
  const std::int64_t b = p.v.size(0), skv = p.v.size(1), hkv = p.v.size(2), dv = p.v.size(3);
  auto out = std::unique_ptr<DequantisedV>(new DequantisedV{testing::HostBuffer(DType::kFloat64, b * skv * hkv * dv), p});
  TensorView v = TensorView::Contiguous(out->buffer.data(), DType::kFloat64, {b, skv, hkv, dv});
  const std::vector<Sequence> seqs = sequences_of(p);
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    const Sequence& seq = seqs[s];
    for (std::int64_t g = 0; g < hkv; ++g) {
      std::vector<bool> keep(static_cast<std::size_t>(seq.kv_len));
      for (std::int64_t j = 0; j < seq.kv_len; ++j) keep[static_cast<std::size_t>(j)] = seen(p, static_cast<std::int64_t>(s), seq, g, j);
      for (std::int64_t c = 0; c < dv; ++c) {
        auto at = [&](std::int64_t j) {
          return static_cast<float>(testing::read_element(p.v, testing::element_offset(p.v, {seq.batch, seq.kv_begin + j, g, c})));
        };
        float amax = 0.f;
        for (std::int64_t j = 0; j < seq.kv_len; ++j)
          if (keep[static_cast<std::size_t>(j)]) amax = std::max(amax, std::fabs(at(j)));
        const float scale = amax / 448.f;
        for (std::int64_t j = 0; j < seq.kv_len; ++j) {
          const double value = keep[static_cast<std::size_t>(j)] && amax > 0.f
                                   ? static_cast<double>(fp8::e4m3_round(at(j) * (448.f / amax))) * scale
                                   : 0.0;
          testing::write_element(v, testing::element_offset(v, {seq.batch, seq.kv_begin + j, g, c}), value);
        }
      }
    }
  }
  out->problem.v = v;
  return out;
}

AttentionSpec qk16_v8_spec(std::optional<std::string> dtype_qk, std::optional<std::string> variant) {
  AttentionSpec spec;
  spec.backend = "FLASHINFER_ATTN";
  AttnQuantSpec quant;
  quant.dtype_qk = std::move(dtype_qk);
  quant.dtype_vo = "fp8_e4m3";
  quant.flashinfer_backend = std::move(variant);
  spec.quant = quant;
  return spec;
}

Result<Attention> qk16_v8_layer(const AttentionProblem& p, const AttentionSpec& spec) {
  AttentionLayerDesc desc;
  desc.num_heads = static_cast<int>(p.q.size(2));
  desc.num_kv_heads = static_cast<int>(p.k.size(2));
  desc.head_size = static_cast<int>(p.q.size(3));
  AttentionConfig config;
  config.default_spec = spec;
  Selector selector(make_platform(probe_cpu_platform(), global_registry()), &global_registry());
  return Attention::Create(desc, config, selector);
}

// What one QK16/V8 run gives against both oracles; empty strings when within their rules.
struct QuantOutcome {
  std::string against_truth, against_same_quantisation;
  testing::Agreement agreement;
  testing::Agreement agreement_same_quantisation;
};

QuantOutcome run_qk16_v8(CaseData& data, const AttentionSpec& spec) {
  AttentionProblem& p = data.problem;
  testing::OracleOutput truth = testing::reference_attention(p, testing::OraclePrecision::kFloat64);
  auto quantised = dequantised_v(p);
  testing::Expectation same = testing::expect(quantised->problem);
  auto layer = qk16_v8_layer(p, spec);
  EXPECT_TRUE(layer.ok()) << layer.status().message();
  if (!layer.ok()) return {"no layer", "no layer", {}, {}};
  testing::poison(p.out);
  if (p.lse) testing::poison(*p.lse);
  const Status status = layer->forward(p);
  EXPECT_TRUE(status.ok()) << data.c.name() << ": " << status.message();
  QuantOutcome o;
  o.against_truth = testing::compare_quantized(p, truth);
  o.against_same_quantisation = testing::compare(p, same);
  o.agreement = testing::agreement(p, truth);
  o.agreement_same_quantisation = testing::agreement(p, same.truth);
  return o;
}

using testing::fresh_rng;

TEST(QuantModeParity, FlashInferQk16V8MatchesBothOraclesOnEveryCaseItTakes) {
  const PlatformInfo info = probe_cpu_platform();
  const auto platform = make_platform(info, global_registry());
  const BackendDescriptor& d = **global_registry().find("FLASHINFER_ATTN");
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  const char* variants[] = {"fa2", "fa3", "auto", nullptr};
  int ran = 0, masked = 0, ragged = 0;
  for (const ParityCase& c : testing::parity_cases()) {
    if (!testing::case_unsupported_reasons(d, *platform, testing::case_shape(c)).empty()) continue;
    auto data = testing::make_case_data(c, rng);
    const char* variant = variants[ran % 4];
    const AttentionSpec spec =
        qk16_v8_spec(ran % 3 == 0 ? std::optional<std::string>(std::string(dtype_name(c.dtype))) : std::nullopt,
                     variant ? std::optional<std::string>(variant) : std::nullopt);
    const QuantOutcome o = run_qk16_v8(*data, spec);
    EXPECT_EQ(o.against_truth, "") << c.name() << " (seed " << seed << ")";
    EXPECT_EQ(o.against_same_quantisation, "") << c.name() << " against the same V quantisation (seed " << seed << ")";
    ++ran;
    masked += c.mask != testing::MaskShape::kNone;
    ragged += c.varlen;
  }
  std::printf("[ QK16/V8  ] FLASHINFER_ATTN: %d cases (%d masked, %d ragged)\n", ran, masked, ragged);
  EXPECT_GE(masked, 6);
  EXPECT_GE(ragged, 2);
}

// Padding keys ten thousand times larger than the rest: were they in a scale, every real key of
// that channel would round to zero and the output would be far from both oracles.
TEST(QuantModeParity, PaddingKeysDoNotWidenTheScales) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  for (testing::MaskShape mask : {testing::MaskShape::kKeyPadding, testing::MaskShape::kDensePerBatch}) {
    ParityCase c;
    c.dtype = DType::kBFloat16;
    c.batch = 2, c.seq_q = 70, c.seq_kv = 150, c.heads_q = 4, c.heads_kv = 2, c.head_size = c.head_size_v = 64;
    c.mask = mask;
    c.lse = true;
    auto data = testing::make_case_data(c, rng);
    AttentionProblem& p = data->problem;
    // Hide keys 100.. from every query and make their values huge.
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t j = 100; j < c.seq_kv; ++j) {
        if (mask == testing::MaskShape::kKeyPadding) {
          testing::write_element(*p.mask, testing::element_offset(*p.mask, {b, j}), 0.0);
        } else {
          for (std::int64_t i = 0; i < c.seq_q; ++i)
            testing::write_element(*p.mask, testing::element_offset(*p.mask, {b, 0, i, j}), 0.0);
        }
        for (std::int64_t h = 0; h < c.heads_kv; ++h)
          for (std::int64_t e = 0; e < c.head_size_v; ++e)
            testing::write_element(p.v, testing::element_offset(p.v, {b, j, h, e}), e % 2 ? 3.0e4 : -3.0e4);
      }
    const QuantOutcome o = run_qk16_v8(*data, qk16_v8_spec(std::nullopt, std::nullopt));
    EXPECT_EQ(o.against_truth, "") << c.name() << " (seed " << seed << ")";
    EXPECT_EQ(o.against_same_quantisation, "") << c.name() << " (seed " << seed << ")";
  }
}

// The figures docs/backends/flashinfer.md quotes: relative L2 error and cosine of the QK16/V8 output
// against the float64 oracle (and, for scale, of plain bf16 FLASHINFER_ATTN), on random normal
// inputs of a long hd128 self-attention.
TEST(QuantModeParity, Qk16V8ErrorOnRandomNormalInputs) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    ParityCase c;
    c.dtype = dtype;
    c.batch = 1, c.seq_q = c.seq_kv = 1024, c.heads_q = c.heads_kv = 2, c.head_size = c.head_size_v = 128;
    auto data = testing::make_case_data(c, rng);
    const QuantOutcome o = run_qk16_v8(*data, qk16_v8_spec(std::nullopt, std::nullopt));
    EXPECT_EQ(o.against_truth, "");
    EXPECT_EQ(o.against_same_quantisation, "");
    std::printf("[ QK16/V8  ] %s Sq=Skv=1024 H=2 D=128: relL2 %.4f cosine %.6f vs float64; relL2 %.2e vs the same "
                "V quantisation (seed %llu)\n",
                std::string(dtype_name(dtype)).c_str(), o.agreement.rel_l2, o.agreement.cosine,
                o.agreement_same_quantisation.rel_l2, static_cast<unsigned long long>(seed));
    EXPECT_LT(o.agreement.rel_l2, 0.05);
    EXPECT_GT(o.agreement.cosine, 0.999);
    // The quantisation, not the kernel's arithmetic, is what the truth sees.
    EXPECT_LT(o.agreement_same_quantisation.rel_l2, 0.25 * o.agreement.rel_l2);
  }
}

}  // namespace
}  // namespace diffattn
