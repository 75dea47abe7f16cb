// FLASHINFER_ATTN's backend folder: where it runs (the CPU, and FLASH_ATTN's GPUs; QK16/V8 on sm_90), its
// quant block (value sets, flashinfer_backend per platform, dtype_qk / dtype_vo against the call),
// and that its unquantised mode is the CPU kernel TORCH_SDPA runs. Numerical parity is the parity
// harness's (tests/parity/parity_test.cc, quant_mode_parity_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "kernels/cpu/fp8_v_cpu.h"
#include "parity/cases.h"
#include "parity/properties.h"
#include "platform/described_platforms.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;

const BackendDescriptor& flashinfer() { return **global_registry().find("FLASHINFER_ATTN"); }

AttentionSpec spec_with(AttnQuantSpec quant) {
  AttentionSpec spec;
  spec.backend = "FLASHINFER_ATTN";
  spec.quant = std::move(quant);
  return spec;
}

AttnQuantSpec variant(const char* name) {
  AttnQuantSpec q;
  q.flashinfer_backend = name;
  return q;
}

Status create_on(const PlatformInfo& platform, const AttentionSpec& spec) {
  BackendInit init;
  init.num_heads = init.num_kv_heads = 2, init.head_size = 64;
  init.spec = spec;
  init.platform = platform;
  auto created = global_registry().create("FLASHINFER_ATTN", init);
  return created.ok() ? Status::Ok() : created.status();
}

TEST(FlashInferAttnBackend, FlashinferBackendValuesAreTheSeedsSet) {
  for (const char* name : {"auto", "fa2", "fa3", "cute-dsl", "trtllm-gen"})
    EXPECT_TRUE(flashinfer().validate_options(spec_with(variant(name))).ok()) << name;
  const Status bad = flashinfer().validate_options(spec_with(variant("fa4")));
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(bad.message(), HasSubstr("quant.flashinfer_backend in [auto, fa2, fa3, cute-dsl, trtllm-gen], got 'fa4'"));
}

TEST(FlashInferAttnBackend, Fa2Fa3AndAutoRunOnTheCpuAndBlackwellKernelsAreRefusedElsewhere) {
  const PlatformInfo cpu = probe_cpu_platform();
  for (const char* name : {"auto", "fa2", "fa3"}) EXPECT_TRUE(create_on(cpu, spec_with(variant(name))).ok()) << name;
  const PlatformInfo hopper = testing::probed_like(9, 0);
  for (const PlatformInfo& off_blackwell : {cpu, hopper})
    for (const char* name : {"cute-dsl", "trtllm-gen"}) {
      const Status status = create_on(off_blackwell, spec_with(variant(name)));
      EXPECT_EQ(status.code(), ErrorCode::kUnsupported) << name << " on " << off_blackwell.describe();
      EXPECT_THAT(status.message(), HasSubstr("Blackwell"));
      EXPECT_THAT(status.message(), HasSubstr("Use 'fa2', 'fa3' or 'auto'"));
    }
  const PlatformInfo b200 = testing::described_cuda({.major = 10, .minor = 0});
  EXPECT_TRUE(create_on(b200, spec_with(variant("cute-dsl"))).ok());
  EXPECT_TRUE(create_on(b200, spec_with(variant("trtllm-gen"))).ok());
  EXPECT_EQ(create_on(testing::described_cuda({.major = 12, .minor = 0}), spec_with(variant("trtllm-gen"))).code(),
            ErrorCode::kUnsupported);
  EXPECT_THAT(create_on(testing::probed_like(8, 0), spec_with(variant("fa3"))).message(), HasSubstr("Hopper"));
  EXPECT_TRUE(create_on(hopper, spec_with(variant("fa3"))).ok());
}

// QK16/V8 runs P*V on FP8 tensor cores: created on Hopper with 'fa3', 'auto' or 'fa2' (the
// mma.sync kernel), on Ada (sm_89) with 'auto' or 'fa2', on the CPU with any; refused on GPUs
// without FP8 tensor cores (sm_80, sm_86), with what to do.
TEST(FlashInferAttnBackend, Qk16V8IsCreatedWhereFp8TensorCoresAreAndRefusedElsewhere) {
  AttnQuantSpec fp8 = variant("auto");
  fp8.dtype_vo = "fp8_e4m3";
  const PlatformInfo hopper = testing::probed_like(9, 0), ada = testing::probed_like(8, 9);
  AttnQuantSpec fa3 = fp8, fa2 = fp8;
  fa3.flashinfer_backend = "fa3";
  fa2.flashinfer_backend = "fa2";
  EXPECT_TRUE(create_on(probe_cpu_platform(), spec_with(fp8)).ok());
  EXPECT_TRUE(create_on(probe_cpu_platform(), spec_with(fa2)).ok());
  EXPECT_TRUE(create_on(hopper, spec_with(fp8)).ok());
  EXPECT_TRUE(create_on(hopper, spec_with(fa3)).ok());
  EXPECT_TRUE(create_on(hopper, spec_with(fa2)).ok());
  EXPECT_TRUE(create_on(ada, spec_with(fp8)).ok());
  EXPECT_TRUE(create_on(ada, spec_with(fa2)).ok());
  EXPECT_THAT(create_on(ada, spec_with(fa3)).message(), HasSubstr("Hopper"));  // 'fa3' names the Hopper kernel
  for (const auto& [major, minor] : {std::pair{8, 0}, {8, 6}})
    for (const AttnQuantSpec& q : {fp8, fa2}) {
      const Status refused = create_on(testing::probed_like(major, minor), spec_with(q));
      EXPECT_EQ(refused.code(), ErrorCode::kUnsupported) << major << "." << minor;
      EXPECT_THAT(refused.message(), HasSubstr("FP8 tensor cores (sm_89 and newer)"));
      EXPECT_THAT(refused.message(), HasSubstr("Leave dtype_vo unset"));
    }
}

TEST(FlashInferAttnBackend, RunsOnTheCpuAndWhereverFlashAttnsKernelsRun) {
  auto cpu = make_platform(probe_cpu_platform(), global_registry())
                 ->select_backend("flashinfer_attn", 128, LayerTraits::Unconstrained());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_EQ(cpu->backend, "FLASHINFER_ATTN");
  for (const auto& [major, minor] : {std::pair{8, 0}, {8, 9}, {9, 0}}) {
    auto gpu = make_platform(testing::probed_like(major, minor), global_registry())
                   ->select_backend("FLASHINFER_ATTN", 128, LayerTraits::Unconstrained());
    ASSERT_TRUE(gpu.ok()) << major << "." << minor << ": " << gpu.status().message();
    EXPECT_EQ(gpu->backend, "FLASHINFER_ATTN");
  }
  // No FLASH_ATTN kernel for Turing or Blackwell in this build: refused with what to select.
  for (const auto& [major, minor] : {std::pair{7, 5}, {10, 0}}) {
    auto gpu = make_platform(testing::probed_like(major, minor), global_registry())
                   ->select_backend("FLASHINFER_ATTN", 128, LayerTraits::Unconstrained());
    ASSERT_FALSE(gpu.ok()) << major << "." << minor;
    EXPECT_EQ(gpu.status().code(), ErrorCode::kUnavailable) << gpu.status().message();
  }
  EXPECT_FALSE(flashinfer().caps.quantized);  // only its quant block quantises, and only when named
}

Result<Attention> layer(const AttentionProblem& p, const std::optional<AttentionSpec>& spec,
                        const char* backend = "FLASHINFER_ATTN") {
  AttentionLayerDesc desc;
  desc.num_heads = static_cast<int>(p.q.size(2));
  desc.num_kv_heads = static_cast<int>(p.k.size(2));
  desc.head_size = static_cast<int>(p.q.size(3));
  AttentionConfig config;
  AttentionSpec s = spec.value_or(AttentionSpec{});
  s.backend = backend;
  config.default_spec = s;
  Selector selector(make_platform(probe_cpu_platform(), global_registry()), &global_registry());
  return Attention::Create(desc, config, selector);
}

std::vector<double> values(const TensorView& t) {
  std::vector<double> out;
  testing::for_each_offset(t, [&](std::int64_t off) { out.push_back(testing::read_element(t, off)); });
  return out;
}

TEST(FlashInferAttnBackend, UnquantisedItIsBitForBitTheKernelTorchSdpaRuns) {
  std::random_device source;
  const std::uint64_t seed = (static_cast<std::uint64_t>(source()) << 32) | source();
  std::mt19937_64 rng(seed);
  testing::ParityCase c;
  c.dtype = DType::kBFloat16, c.batch = 2, c.seq_q = 130, c.seq_kv = 200, c.heads_q = 4, c.heads_kv = 2;
  c.head_size = c.head_size_v = 64, c.lse = true, c.mask = testing::MaskShape::kDense, c.block_mask = true;
  auto data = testing::make_case_data(c, rng);
  AttentionProblem& p = data->problem;
  std::vector<double> out, lse;  // TORCH_SDPA's
  for (const char* name : {"TORCH_SDPA", "FLASHINFER_ATTN"}) {
    testing::poison(p.out), testing::poison(*p.lse);
    auto l = layer(p, std::nullopt, name);
    ASSERT_TRUE(l.ok()) << l.status().message();
    ASSERT_TRUE(l->forward(p).ok());
    if (std::string(name) == "TORCH_SDPA") {
      out = values(p.out), lse = values(*p.lse);
    } else {
      EXPECT_EQ(values(p.out), out) << "seed " << seed;
      EXPECT_EQ(values(*p.lse), lse) << "seed " << seed;
    }
  }
}

TEST(FlashInferAttnBackend, ACallInAnotherDtypeThanTheQuantBlockNamesIsRefusedUnwritten) {
  std::mt19937_64 rng(std::random_device{}());
  testing::ParityCase c;
  c.dtype = DType::kBFloat16, c.seq_q = c.seq_kv = 20, c.head_size = c.head_size_v = 64, c.lse = true;
  AttnQuantSpec qk;
  qk.dtype_qk = "float16";
  AttnQuantSpec vo;
  vo.dtype_vo = "float16";
  for (const AttnQuantSpec& quant : {qk, vo}) {
    auto data = testing::make_case_data(c, rng);
    auto l = layer(data->problem, spec_with(quant));
    ASSERT_TRUE(l.ok()) << l.status().message();
    testing::poison(data->problem.out), testing::poison(*data->problem.lse);
    const Status status = l->forward(data->problem);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidInput);
    EXPECT_THAT(status.message(), HasSubstr("are bfloat16; pass"));
    EXPECT_EQ(testing::check_untouched(data->problem), "");
  }
  AttnQuantSpec same;
  same.dtype_qk = same.dtype_vo = "bfloat16";
  auto data = testing::make_case_data(c, rng);
  auto l = layer(data->problem, spec_with(same));
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->forward(data->problem).ok());
}

TEST(FlashInferAttnBackend, CausalWithAMaskIsRefusedAsTheSeedsDo) {
  testing::ParityCase c;
  c.dtype = DType::kFloat16, c.head_size = c.head_size_v = 64, c.causal = true;
  for (testing::MaskShape mask : {testing::MaskShape::kKeyPadding, testing::MaskShape::kDense}) {
    c.mask = mask;
    const auto reasons = flashinfer().unsupported_reasons(testing::case_shape(c));
    ASSERT_EQ(reasons.size(), 1u);
    EXPECT_THAT(reasons[0], HasSubstr("causal=true together with an explicit mask is not supported"));
  }
}

// The keys a query sees, which alone set the FP8 scales: the sequence's keys under the key-padding
// mask, any row's under a dense one, none past the last query row under causality.
TEST(FlashInferAttnBackend, FP8ScalesComeFromTheKeysSomeQuerySees) {
  std::mt19937_64 rng(std::random_device{}());
  testing::ParityCase c;
  c.dtype = DType::kBFloat16, c.batch = 2, c.seq_q = 3, c.seq_kv = 5, c.heads_q = 2, c.heads_kv = 1;
  c.head_size = c.head_size_v = 64, c.mask = testing::MaskShape::kDense;
  auto data = testing::make_case_data(c, rng);
  AttentionProblem& p = data->problem;
  testing::for_each_offset(*p.mask, [&](std::int64_t off) { testing::write_element(*p.mask, off, 0.0); });
  testing::write_element(*p.mask, testing::element_offset(*p.mask, {0, 1, 2, 3}), 1.0);  // batch 0, head 1 sees key 3
  testing::write_element(*p.mask, testing::element_offset(*p.mask, {1, 0, 0, 0}), 1.0);  // batch 1, head 0 sees key 0
  EXPECT_EQ(seen_keys(p), (std::vector<std::uint8_t>{0, 0, 0, 1, 0, 1, 0, 0, 0, 0}));
  p.mask.reset();
  p.causal = true;  // keys 3 and 4 come after every query row
  EXPECT_EQ(seen_keys(p), (std::vector<std::uint8_t>{1, 1, 1, 0, 0, 1, 1, 1, 0, 0}));
  const Fp8Values v = quantize_v_fp8(p);
  ASSERT_EQ(v.scales.size(), 2u * 64u);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t e = 0; e < 64; ++e) {
      double amax = 0;
      for (std::int64_t j = 0; j < 3; ++j)
        amax = std::max(amax, std::fabs(testing::read_element(p.v, testing::element_offset(p.v, {b, j, 0, e}))));
      EXPECT_EQ(v.scales[static_cast<std::size_t>(b * 64 + e)], static_cast<float>(amax) / 448.f);
      for (std::int64_t j = 3; j < 5; ++j) EXPECT_EQ(v.codes[static_cast<std::size_t>((b * 5 + j) * 64 + e)], 0);
    }
}

}  // namespace
}  // namespace diffattn
