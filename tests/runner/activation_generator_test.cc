#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "runner/activation_generator.h"

namespace diffattn::runner {
namespace {

struct Qkv {
  HostTensor q, k, v;
};

Qkv generate(const ActivationKey& key, DType dtype = DType::kBFloat16, int heads = 4, int kv_heads = 4, int dim = 64,
             int tokens = 96) {
  Qkv t{HostTensor(dtype, {1, tokens, heads, dim}), HostTensor(dtype, {1, tokens, kv_heads, dim}),
        HostTensor(dtype, {1, tokens, kv_heads, dim})};
  generate_activations(key, ActivationStats{}, t.q, t.k, t.v);
  return t;
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

ActivationKey key(std::uint64_t seed) { return ActivationKey{seed, "tiny-dit", "self", 1, 0, 2}; }

TEST(ActivationGenerator, SameKeyGivesSameBytes) {
  const Qkv a = generate(key(7));
  const Qkv b = generate(key(7));
  EXPECT_TRUE(same_bytes(a.q, b.q));
  EXPECT_TRUE(same_bytes(a.k, b.k));
  EXPECT_TRUE(same_bytes(a.v, b.v));
}

TEST(ActivationGenerator, EveryPartOfTheKeyChangesTheBytes) {
  const Qkv base = generate(key(7));
  EXPECT_FALSE(same_bytes(base.q, generate(key(8)).q));
  ActivationKey other_layer = key(7);
  other_layer.layer = 2;
  EXPECT_FALSE(same_bytes(base.k, generate(other_layer).k));
  ActivationKey other_step = key(7);
  other_step.step = 1;
  EXPECT_FALSE(same_bytes(base.v, generate(other_step).v));
  ActivationKey other_role = key(7);
  other_role.role = "cross";
  EXPECT_FALSE(same_bytes(base.q, generate(other_role).q));
}

TEST(ActivationGenerator, QKAndVDiffer) {
  const Qkv t = generate(key(3), DType::kFloat32);
  EXPECT_FALSE(same_bytes(t.q, t.k));
  EXPECT_FALSE(same_bytes(t.k, t.v));
}

// Mean over tokens of one (head, channel), and its spread across channels.
double channel_mean(const HostTensor& t, int head, int channel) {
  const auto& s = t.shape();
  double sum = 0;
  for (std::int64_t tok = 0; tok < s[1]; ++tok) sum += t.get((tok * s[2] + head) * s[3] + channel);
  return sum / static_cast<double>(s[1]);
}

TEST(ActivationGenerator, KeysCarryAChannelBiasQueriesDoNot) {
  const Qkv t = generate(key(11), DType::kFloat32, 4, 4, 64, 512);
  double k_bias = 0, q_bias = 0;
  for (int d = 0; d < 64; ++d) {
    k_bias += std::abs(channel_mean(t.k, 0, d));
    q_bias += std::abs(channel_mean(t.q, 0, d));
  }
  EXPECT_GT(k_bias, 3.0 * q_bias) << "K mean |bias| " << k_bias / 64 << ", Q " << q_bias / 64;
}

TEST(ActivationGenerator, AFewChannelsAreOutliers) {
  const Qkv t = generate(key(5), DType::kFloat32, 2, 2, 64, 256);
  const auto& s = t.q.shape();
  std::vector<double> power(64, 0.0);
  for (std::int64_t tok = 0; tok < s[1]; ++tok)
    for (int d = 0; d < 64; ++d) power[d] += std::pow(t.q.get((tok * s[2] + 0) * s[3] + d), 2);
  std::vector<double> sorted = power;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[32];
  int outliers = 0;
  for (double p : power) outliers += p > 10.0 * median;
  EXPECT_GE(outliers, 1);
  EXPECT_LE(outliers, 2);
}

TEST(ActivationGenerator, ValuesAreFiniteAndNotConstant) {
  const Qkv t = generate(key(9), DType::kFloat16);
  double sum2 = 0;
  for (std::int64_t i = 0; i < t.v.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(t.v.get(i)));
    sum2 += t.v.get(i) * t.v.get(i);
  }
  EXPECT_NEAR(sum2 / t.v.numel(), 1.0, 0.2);  // V is standard normal
}

TEST(ActivationGenerator, GroupedQueryShapesAreFilled) {
  const Qkv t = generate(key(1), DType::kBFloat16, 8, 2, 32, 40);
  EXPECT_EQ(t.k.shape()[2], 2);
  double sum2 = 0;
  for (std::int64_t i = 0; i < t.k.numel(); ++i) sum2 += t.k.get(i) * t.k.get(i);
  EXPECT_GT(sum2, 0.0);
}

}  // namespace
}  // namespace diffattn::runner
