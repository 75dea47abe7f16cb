#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "registry/capability_checks.h"

namespace diffattn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Capabilities dense_gpu_caps() {
  Capabilities caps;
  caps.devices = {DeviceKind::kCuda};
  caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  caps.head_sizes = {64, 128};
  caps.gqa = false;
  caps.causal = false;
  caps.key_padding_mask = false;
  caps.dense_mask = false;
  caps.lse = false;
  caps.varlen = false;
  caps.cross = false;
  return caps;
}

ProblemShape plain_problem() {
  ProblemShape p;
  p.dtype = DType::kBFloat16;
  p.device = DeviceKind::kCuda;
  p.seqlen_q = p.seqlen_kv = 256;
  p.heads_q = p.heads_kv = 8;
  p.head_size = p.head_size_v = 128;
  return p;
}

TEST(CapabilityChecksTest, SupportedProblemHasNoReasons) {
  EXPECT_THAT(capability_reasons(dense_gpu_caps(), plain_problem()), IsEmpty());
}

TEST(CapabilityChecksTest, EachPredicateNamesItsRule) {
  const Capabilities caps = dense_gpu_caps();
  ProblemShape p = plain_problem();
  p.device = DeviceKind::kCpu;
  EXPECT_THAT(*capability::check_device(caps, p), HasSubstr("device cpu is not supported (runs on: cuda)"));
  p = plain_problem();
  p.dtype = DType::kFloat32;
  EXPECT_THAT(*capability::check_dtype(caps, p), HasSubstr("dtype float32 is not supported (supported: float16, bfloat16)"));
  p = plain_problem();
  p.head_size = p.head_size_v = 80;
  EXPECT_THAT(*capability::check_head_size(caps, p), HasSubstr("head_size 80 is not supported (supported: 64, 128)"));
  p = plain_problem();
  p.head_size_v = 96;
  EXPECT_THAT(*capability::check_head_size(caps, p), HasSubstr("value head_size 96"));
  p = plain_problem();
  p.heads_kv = 2;
  EXPECT_THAT(*capability::check_gqa(caps, p), HasSubstr("q_heads=8, kv_heads=2"));
  p = plain_problem();
  p.causal = true;
  EXPECT_THAT(*capability::check_causal(caps, p), HasSubstr("causal"));
  p = plain_problem();
  p.mask = MaskKind::kKeyPadding;
  EXPECT_THAT(*capability::check_mask(caps, p), HasSubstr("key-padding"));
  p.mask = MaskKind::kDense;
  EXPECT_THAT(*capability::check_mask(caps, p), HasSubstr("dense masks"));
  p = plain_problem();
  p.wants_lse = true;
  EXPECT_THAT(*capability::check_lse(caps, p), HasSubstr("log-sum-exp"));
  p = plain_problem();
  p.seqlen_kv = 77;
  EXPECT_THAT(*capability::check_cross(caps, p), HasSubstr("Sq=256, Skv=77"));
  p = plain_problem();
  p.varlen = true;
  EXPECT_THAT(*capability::check_varlen(caps, p), HasSubstr("cu_seqlens"));
}

TEST(CapabilityChecksTest, CapabilityReasonsCollectsEveryFailure) {
  ProblemShape p = plain_problem();
  p.dtype = DType::kFloat32;
  p.causal = true;
  p.seqlen_kv = 3;
  const auto reasons = capability_reasons(dense_gpu_caps(), p);
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_THAT(reasons[0], HasSubstr("dtype"));
  EXPECT_THAT(reasons[1], HasSubstr("causal"));
  EXPECT_THAT(reasons[2], HasSubstr("Skv=3"));
}

TEST(CapabilityChecksTest, DescriptorAddsBackendSpecificReasons) {
  Registry registry;
  register_builtin_backends(registry);
  ProblemShape p = plain_problem();
  p.seqlen_kv = 1;
  const auto reasons = (*registry.find("CUDNN_ATTN"))->unsupported_reasons(p);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_THAT(reasons[0], HasSubstr("key/value sequence length 1"));

  p = plain_problem();
  p.causal = true;
  p.mask = MaskKind::kDense;
  EXPECT_THAT((*registry.find("FLASHINFER_ATTN"))->unsupported_reasons(p),
              ElementsAre(HasSubstr("causal=true together with an explicit mask")));
  p.device = DeviceKind::kCpu;
  p.dtype = DType::kFloat32;
  p.head_size = p.head_size_v = 300;
  EXPECT_THAT((*registry.find("TORCH_SDPA"))->unsupported_reasons(p), IsEmpty());
}

}  // namespace
}  // namespace diffattn
