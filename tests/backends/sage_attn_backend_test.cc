// SAGE_ATTN's backend folder: its options, the path from a configuration to the CPU implementation,
// and that it is never chosen unless named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "backends/sage_attn/sage_options.h"
#include "kernels/cpu/sage_cpu.h"
#include "parity/cases.h"
#include "platform/described_platforms.h"
#include "platform/routes.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;

const BackendDescriptor& sage() { return **global_registry().find("SAGE_ATTN"); }

AttentionSpec spec_with(nlohmann::json extra) {
  AttentionSpec spec;
  spec.backend = "SAGE_ATTN";
  spec.extra = std::move(extra);
  return spec;
}

TEST(SageAttnBackend, ThePvOptionTakesFp8OrFp16AndNothingElse) {
  EXPECT_TRUE(sage().validate_options(spec_with(nlohmann::json::object())).ok());
  EXPECT_TRUE(sage().validate_options(spec_with({{"pv", "fp8"}})).ok());
  EXPECT_TRUE(sage().validate_options(spec_with({{"pv", "fp16"}})).ok());
  for (const nlohmann::json& bad : {nlohmann::json{{"pv", "int4"}}, nlohmann::json{{"pv", 16}},
                                    nlohmann::json{{"pv_accum", "fp32"}}}) {
    const Status status = sage().validate_options(spec_with(bad));
    EXPECT_EQ(status.code(), ErrorCode::kInvalidConfig) << bad.dump();
    EXPECT_THAT(status.message(), HasSubstr("SAGE_ATTN")) << status.message();
  }
  EXPECT_THAT(sage().validate_options(spec_with({{"pv", "int4"}})).message(), HasSubstr("fp8, fp16"));
  BackendInit init;
  init.spec = spec_with({{"pv", "bf16"}});
  auto created = global_registry().create("SAGE_ATTN", init);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), ErrorCode::kInvalidConfig);
}

// An unset pv follows the hardware: FP8 P*V on the CPU and wherever FP8 tensor cores exist (Ada,
// sm_89, and Hopper), 16-bit on Ampere (sm_80-sm_87), where an explicit "fp8" is refused at creation
// with what to set instead.
TEST(SageAttnBackend, AnUnsetPvFollowsTheGpuAndAnExplicitFp8NeedsFp8TensorCores) {
  const PlatformInfo cpu = testing::described_cpu(), hopper = testing::probed_like(9, 0), ada = testing::probed_like(8, 9),
                     ampere = testing::probed_like(8, 0), ga10x = testing::probed_like(8, 6);
  const std::optional<AttentionSpec> none, fp8 = spec_with({{"pv", "fp8"}}), fp16 = spec_with({{"pv", "fp16"}});
  EXPECT_EQ(*sage_pv_mode(none, cpu), sage::PvMode::kFp8);
  EXPECT_EQ(*sage_pv_mode(none, hopper), sage::PvMode::kFp8);
  EXPECT_EQ(*sage_pv_mode(none, ada), sage::PvMode::kFp8);
  EXPECT_EQ(*sage_pv_mode(none, ampere), sage::PvMode::kFp16);
  EXPECT_EQ(*sage_pv_mode(spec_with(nlohmann::json::object()), ga10x), sage::PvMode::kFp16);
  EXPECT_EQ(*sage_pv_mode(fp16, ada), sage::PvMode::kFp16);
  EXPECT_EQ(*sage_pv_mode(fp16, ampere), sage::PvMode::kFp16);
  EXPECT_EQ(*sage_pv_mode(fp8, hopper), sage::PvMode::kFp8);
  EXPECT_EQ(*sage_pv_mode(fp8, ada), sage::PvMode::kFp8);
  for (const PlatformInfo& old : {ampere, ga10x}) {
    const auto refused = sage_pv_mode(fp8, old);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), ErrorCode::kUnsupported);
    EXPECT_THAT(refused.status().message(), HasSubstr("\"pv\": \"fp16\""));
    EXPECT_THAT(refused.status().message(), HasSubstr(old.sm_string()));
    BackendInit init;
    init.spec = fp8;
    init.platform = old;
    auto created = global_registry().create("SAGE_ATTN", init);
    ASSERT_FALSE(created.ok());
    EXPECT_EQ(created.status().code(), ErrorCode::kUnsupported);
  }
}

// A layer configured with `extra` gives exactly what the CPU implementation gives in `pv` mode.
void expect_layer_runs_mode(const nlohmann::json& extra, sage::PvMode pv) {
  std::random_device source;
  const std::uint64_t seed = (static_cast<std::uint64_t>(source()) << 32) | source();
  std::mt19937_64 rng(seed);
  testing::ParityCase c;
  c.dtype = DType::kBFloat16, c.seq_q = 50, c.seq_kv = 140, c.heads_q = 4, c.heads_kv = 2;
  c.head_size = c.head_size_v = 64, c.lse = true;
  auto data = testing::make_case_data(c, rng);
  AttentionProblem& p = data->problem;
  ASSERT_TRUE(sage::run_sage_attn_cpu(p, pv).ok());
  std::vector<double> direct;
  testing::for_each_offset(p.out, [&](std::int64_t off) { direct.push_back(testing::read_element(p.out, off)); });
  testing::poison(p.out);

  AttentionLayerDesc desc;
  desc.num_heads = 4, desc.num_kv_heads = 2, desc.head_size = 64;
  AttentionConfig config;
  config.default_spec = spec_with(extra);
  Selector selector(make_platform(probe_cpu_platform(), global_registry()), &global_registry());
  auto layer = Attention::Create(desc, config, selector);
  ASSERT_TRUE(layer.ok()) << layer.status().message();
  ASSERT_TRUE(layer->forward(p, nullptr).ok());
  std::size_t at = 0;
  testing::for_each_offset(p.out, [&](std::int64_t off) {
    ASSERT_EQ(testing::read_element(p.out, off), direct[at++]) << extra.dump() << " seed " << seed;
  });
}

TEST(SageAttnBackend, TheConfiguredModeReachesTheCpuImplementation) {
  expect_layer_runs_mode(nlohmann::json::object(), sage::PvMode::kFp8);
  expect_layer_runs_mode({{"pv", "fp16"}}, sage::PvMode::kFp16);
}

TEST(SageAttnBackend, IsQuantizedAndNeverChosenUnasked) {
  EXPECT_TRUE(sage().caps.quantized);
  PlatformInfo h200;
  h200.kind = PlatformKind::kCuda, h200.cc_major = 9, h200.cc_minor = 0, h200.cudnn_version = 91900;
  h200.features.flash_attn = true, h200.features.sage_attn = true;
  for (const PlatformInfo& info : {probe_cpu_platform(), h200})
    for (int head_size : {64, 128}) {
      auto decision = make_platform(info, global_registry())->select_backend(std::nullopt, head_size,
                                                                              LayerTraits::Unconstrained());
      ASSERT_TRUE(decision.ok()) << decision.status().message();
      EXPECT_NE(decision->backend, "SAGE_ATTN") << info.describe();
    }
}

// Quantized backends change the numbers a model computes, so no route may choose one unasked.
TEST(SageAttnBackend, NoRouteListsAQuantizedBackendAsADefault) {
  std::vector<const Route*> routes{&cpu_route()};
  for (int capability = 50; capability <= 130; ++capability) routes.push_back(&cuda_route(capability));
  for (const Route* route : routes)
    for (std::string_view name : route->defaults) {
      auto d = global_registry().find(name);
      ASSERT_TRUE(d.ok()) << name;
      EXPECT_FALSE((*d)->caps.quantized) << name << " is a default of route " << route->label;
    }
}

TEST(SageAttnBackend, CudaWithoutItsKernelsIsUnavailableWithWhatToDo) {
  PlatformInfo gpu;
  gpu.kind = PlatformKind::kCuda, gpu.cc_major = 9, gpu.cc_minor = 0;
  const std::optional<std::string> reason = sage().unavailable_reason(gpu);
  ASSERT_TRUE(reason.has_value());
  EXPECT_THAT(*reason, HasSubstr("select FLASH_ATTN"));
  EXPECT_FALSE(sage().unavailable_reason(probe_cpu_platform()).has_value());
  EXPECT_TRUE(probe_cpu_platform().features.sage_attn);
}

}  // namespace
}  // namespace diffattn
