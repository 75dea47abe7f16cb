#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "runner/activation_source.h"
#include "runner/quality_metrics.h"
#include "runner/text_padding_mask.h"
#include "runner/workload_runner.h"

namespace diffattn::runner {
namespace {

std::mt19937& rng() {
  static std::mt19937 g{std::random_device{}()};
  return g;
}

int random_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng()); }

WorkloadPlan plan_with_prompt(const std::string& model, int prompt_tokens) {
  RunRequest r;
  r.model = model;
  r.prompt_tokens = prompt_tokens;
  auto plan = plan_workload(r, /*on_device=*/true, 1);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? std::move(plan).value() : WorkloadPlan{};
}

// Checks mask[b, i] against `expected(i)` for every batch row.
template <typename Fn>
void expect_rows(const KeyPaddingMask& m, Fn expected) {
  ASSERT_EQ(m.keep.size(), static_cast<std::size_t>(m.batch * m.keys));
  for (std::int64_t b = 0; b < m.batch; ++b)
    for (std::int64_t i = 0; i < m.keys; ++i)
      ASSERT_EQ(m.keep[b * m.keys + i], expected(i) ? 1 : 0) << "batch " << b << " key " << i;
}

TEST(TextPaddingMask, CrossRoleKeepsTheFirstPromptTokens) {
  const int prompt = random_int(1, 63);
  const WorkloadPlan plan = plan_with_prompt("tiny-dit", prompt);
  ASSERT_EQ(plan.roles.size(), 2u);
  EXPECT_FALSE(plan.roles[0].text_keys_masked);  // self: video keys only
  EXPECT_TRUE(plan.roles[1].text_keys_masked);
  const std::int64_t batch = random_int(1, 3);
  auto self = text_padding_mask(plan, plan.roles[0], batch, plan.roles[0].seqlen_kv);
  ASSERT_TRUE(self.ok());
  EXPECT_FALSE(self->has_value());
  auto cross = text_padding_mask(plan, plan.roles[1], batch, 64);
  ASSERT_TRUE(cross.ok()) << cross.status().message();
  ASSERT_TRUE(cross->has_value());
  const KeyPaddingMask& m = **cross;
  EXPECT_EQ(m.batch, batch);
  EXPECT_EQ(m.keys, 64);
  expect_rows(m, [&](std::int64_t i) { return i < prompt; });
  const TensorView v = m.view();
  EXPECT_EQ(v.dtype, DType::kBool);
  EXPECT_EQ(v.shape_string(), "[" + std::to_string(batch) + ", 64]");
}

TEST(TextPaddingMask, JointRoleWithTextFirstDropsTheTextTail) {
  const int prompt = random_int(1, 511);
  const WorkloadPlan plan = plan_with_prompt("flux.1-dev", prompt);  // [text; image]
  for (const RolePlan& role : plan.roles) {
    ASSERT_TRUE(role.text_keys_masked);
    auto mask = text_padding_mask(plan, role, 1, role.seqlen_kv);
    ASSERT_TRUE(mask.ok()) << mask.status().message();
    ASSERT_TRUE(mask->has_value());
    EXPECT_EQ((*mask)->keys, 4096 + 512);
    expect_rows(**mask, [&](std::int64_t i) { return i < prompt || i >= 512; });
  }
}

TEST(TextPaddingMask, JointRoleWithTextLastKeepsEveryVideoKey) {
  const int prompt = random_int(1, 332);
  const WorkloadPlan plan = plan_with_prompt("sd3-medium", prompt);  // [image; text]
  const RolePlan& role = plan.roles.at(0);
  auto mask = text_padding_mask(plan, role, 2, role.seqlen_kv);
  ASSERT_TRUE(mask.ok()) << mask.status().message();
  ASSERT_TRUE(mask->has_value());
  EXPECT_EQ((*mask)->keys, 4096 + 333);
  expect_rows(**mask, [&](std::int64_t i) { return i < 4096 + prompt; });
}

TEST(TextPaddingMask, KeepRowPlacesTheTextAsToldAndLeavesOtherRolesAlone) {
  const std::int64_t text = random_int(2, 40), video = random_int(1, 40), prompt = random_int(1, text - 1);
  const auto first = text_keep_row(text + video, TextKeys::kFirst, text, prompt);
  const auto last = text_keep_row(text + video, TextKeys::kLast, text, prompt);
  for (std::int64_t i = 0; i < text + video; ++i) {
    EXPECT_EQ(first[i], (i < prompt || i >= text) ? 1 : 0) << i;
    EXPECT_EQ(last[i], (i < video + prompt) ? 1 : 0) << i;
  }
  for (std::uint8_t k : text_keep_row(video, TextKeys::kNone, text, prompt)) EXPECT_EQ(k, 1);
}

TEST(TextPaddingMask, FullPromptMasksNothing) {
  const WorkloadPlan plan = plan_with_prompt("tiny-dit", 64);
  for (const RolePlan& role : plan.roles) EXPECT_FALSE(role.text_keys_masked);
  EXPECT_NE(text_mask_summary(plan).find("no role is masked"), std::string::npos);
  auto mask = text_padding_mask(plan, plan.roles[1], 1, 64);
  ASSERT_TRUE(mask.ok());
  EXPECT_FALSE(mask->has_value());
}

TEST(TextPaddingMask, OutOfRangePromptIsRefusedNamingTheRange) {
  for (int bad : {0, -random_int(1, 9), 64 + random_int(1, 100)}) {
    RunRequest r;
    r.model = "tiny-dit";
    r.prompt_tokens = bad;
    auto plan = plan_workload(r, false, 1);
    ASSERT_FALSE(plan.ok()) << bad;
    EXPECT_EQ(plan.status().code(), ErrorCode::kInvalidConfig);
    EXPECT_NE(plan.status().message().find("1 to 64"), std::string::npos) << plan.status().message();
  }
}

TEST(TextPaddingMask, JointModelWithoutTextPlacementIsAnError) {
  ModelSpec model;
  model.name = "custom";
  ModelRole role;
  role.role = "joint";
  role.key_tokens = "joint";
  auto where = text_keys_of(model, role);
  ASSERT_FALSE(where.ok());
  EXPECT_NE(where.status().message().find("joint_text"), std::string::npos);
}

TEST(TextPaddingMask, MaskedRolesAreNotLeftToTrtllmByDefault) {
  const WorkloadPlan plan = plan_with_prompt("tiny-dit", 20);
  EXPECT_TRUE(layer_traits(plan, plan.roles[0]).allows_trtllm_default);
  EXPECT_FALSE(layer_traits(plan, plan.roles[1]).allows_trtllm_default);
}

// TORCH_SDPA on `qkv` with an optional mask and keys [0, keys) of k/v.
HostTensor sdpa(QkvTensors& qkv, const std::optional<TensorView>& mask, std::int64_t keys) {
  const auto& qs = qkv.q.shape();
  const auto& ks = qkv.k.shape();
  HostTensor out(qkv.q.dtype(), qs);
  AttentionLayerDesc desc;
  desc.num_heads = static_cast<int>(qs[2]);
  desc.num_kv_heads = static_cast<int>(ks[2]);
  desc.head_size = static_cast<int>(qs[3]);
  Selector selector(make_platform(probe_cpu_platform(), global_registry()), &global_registry());
  auto layer = Attention::Create(desc, baseline_config(), selector);
  EXPECT_TRUE(layer.ok()) << layer.status().message();
  // K/V views over the first `keys` keys of each batch row, strided like the full tensors.
  TensorView k = qkv.k.view(), v = qkv.v.view();
  k.shape[1] = keys;
  v.shape[1] = keys;
  AttentionProblem p;
  p.q = qkv.q.view();
  p.k = k;
  p.v = v;
  p.out = out.view();
  p.mask = mask;
  const Status s = layer->forward(p, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(TextPaddingMask, MaskedCrossAttentionDiffersFromUnmaskedAndMatchesTorchSdpa) {
  const int prompt = random_int(4, 40);
  RunRequest r;
  r.model = "tiny-dit";
  r.height = 64;
  r.width = 64;
  r.frames = 5;
  r.batch = 2;
  r.dtype = DType::kFloat32;
  r.prompt_tokens = prompt;
  r.seed = std::uniform_int_distribution<std::uint64_t>()(rng());
  auto plan = plan_workload(r, false, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const RolePlan& cross = plan->roles.at(1);
  ActivationSample sample;
  sample.layer = 1;
  sample.label = "layer 1 step 0";
  auto qkv = materialize(*plan, cross, sample, r.seed);
  ASSERT_TRUE(qkv.ok()) << qkv.status().message();
  const std::int64_t keys = qkv->k.shape()[1];
  auto mask = text_padding_mask(*plan, cross, qkv->k.shape()[0], keys);
  ASSERT_TRUE(mask.ok() && mask->has_value());

  const HostTensor masked = sdpa(*qkv, (*mask)->view(), keys);
  const HostTensor unmasked = sdpa(*qkv, std::nullopt, keys);
  // Independently: a mask written by hand, and attention over the kept keys alone.
  std::vector<std::uint8_t> by_hand(static_cast<std::size_t>(2 * keys), 0);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < prompt; ++i) by_hand[b * keys + i] = 1;
  const HostTensor direct = sdpa(*qkv, TensorView::Contiguous(by_hand.data(), DType::kBool, {2, keys}), keys);
  const HostTensor truncated = sdpa(*qkv, std::nullopt, prompt);

  EXPECT_GT(compare_outputs(unmasked, masked).rel_l2, 1e-2);
  EXPECT_EQ(compare_outputs(direct, masked).max_abs, 0.0);
  EXPECT_LT(compare_outputs(truncated, masked).rel_l2, 1e-5);
}

}  // namespace
}  // namespace diffattn::runner
