#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "runner/activation_generator.h"

namespace diffattn::runner {
namespace {

struct Qkv {
  HostTensor q, k, v;
};

Qkv generate(const ActivationKey& key, DType dtype = DType::kBFloat16, int heads = 4, int kv_heads = 4, int dim = 64,
             int tokens = 96, const ActivationStats& stats = ActivationStats{}) {
  Qkv t{HostTensor(dtype, {1, tokens, heads, dim}), HostTensor(dtype, {1, tokens, kv_heads, dim}),
        HostTensor(dtype, {1, tokens, kv_heads, dim})};
  generate_activations(key, stats, t.q, t.k, t.v);
  return t;
}

std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
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

// One or two channels of Q carry more than ten times the median channel's power, with the index
// code and in a video role alike.
void expect_a_few_outlier_channels(const Qkv& t, const char* what) {
  const auto& s = t.q.shape();
  const int dim = static_cast<int>(s[3]);
  std::vector<double> power(dim, 0.0);
  for (std::int64_t tok = 0; tok < s[1]; ++tok)
    for (int d = 0; d < dim; ++d) power[d] += std::pow(t.q.get((tok * s[2] + 0) * s[3] + d), 2);
  std::vector<double> sorted = power;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[dim / 2];
  int outliers = 0;
  for (double p : power) outliers += p > 10.0 * median;
  EXPECT_GE(outliers, 1) << what;
  EXPECT_LE(outliers, 2) << what;
}

TEST(ActivationGenerator, AFewChannelsAreOutliers) {
  expect_a_few_outlier_channels(generate(key(5), DType::kFloat32, 2, 2, 64, 256), "index code");
  ActivationKey video = key(fresh_seed());
  video.video = VideoGeometry{4, 8, 8};
  expect_a_few_outlier_channels(generate(video, DType::kFloat32, 2, 2, 64, 256), "video");
}

TEST(ActivationGenerator, ValuesAreFiniteAndNotConstant) {
  const Qkv t = generate(key(9), DType::kFloat16);
  double sum2 = 0;
  for (std::int64_t i = 0; i < t.v.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(t.v.get(i)));
    sum2 += t.v.get(i) * t.v.get(i);
  }
  EXPECT_NEAR(sum2 / t.v.numel(), 1.0, 0.2);  // V has unit variance
}

TEST(ActivationGenerator, GroupedQueryShapesAreFilled) {
  const Qkv t = generate(key(1), DType::kBFloat16, 8, 2, 32, 40);
  EXPECT_EQ(t.k.shape()[2], 2);
  double sum2 = 0;
  for (std::int64_t i = 0; i < t.k.numel(); ++i) sum2 += t.k.get(i) * t.k.get(i);
  EXPECT_GT(sum2, 0.0);
}

// The offset a bias adds to channel d of head h: the difference to the same key without it, which
// must be one constant over all tokens.
std::vector<double> channel_offsets(const HostTensor& with, const HostTensor& without, std::uint64_t seed) {
  const auto& s = with.shape();
  std::vector<double> offsets;
  for (int h = 0; h < s[2]; ++h)
    for (int d = 0; d < s[3]; ++d) {
      const double first = with.get(h * s[3] + d) - without.get(h * s[3] + d);
      for (std::int64_t tok = 1; tok < s[1]; ++tok) {
        const std::int64_t i = (tok * s[2] + h) * s[3] + d;
        EXPECT_NEAR(with.get(i) - without.get(i), first, 1e-4 * (1 + std::abs(with.get(i)))) << "seed " << seed;
      }
      offsets.push_back(std::abs(first));
    }
  return offsets;
}

double mean_of(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

TEST(ActivationGenerator, QueriesAndKeysCarryChannelOffsetsKeysLarger) {
  const std::uint64_t seed = fresh_seed();
  ActivationStats no_bias;
  no_bias.q_bias_sigma = 0;
  no_bias.k_bias_sigma = 0;
  const Qkv with = generate(key(seed), DType::kFloat32, 4, 4, 64, 64);
  const Qkv without = generate(key(seed), DType::kFloat32, 4, 4, 64, 64, no_bias);
  const double q_offset = mean_of(channel_offsets(with.q, without.q, seed));
  const double k_offset = mean_of(channel_offsets(with.k, without.k, seed));
  EXPECT_GT(q_offset, 0.02) << "seed " << seed;
  EXPECT_GT(k_offset, 2.0 * q_offset) << "seed " << seed;
}

// Share of |x| > 4 (a standard normal gives 6.3e-5; unit-variance Student t with 4 dof about 5e-3).
double share_beyond_4(const HostTensor& t) {
  std::int64_t beyond = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) beyond += std::abs(t.get(i)) > 4.0;
  return static_cast<double>(beyond) / static_cast<double>(t.numel());
}

TEST(ActivationGenerator, ValuesAreHeavyTailedUnlessAskedForNormalNoise) {
  const std::uint64_t seed = fresh_seed();
  ActivationStats normal_noise;
  normal_noise.heavy_tails = false;
  const Qkv heavy = generate(key(seed), DType::kFloat32, 4, 4, 64, 512);
  const Qkv normal = generate(key(seed), DType::kFloat32, 4, 4, 64, 512, normal_noise);
  EXPECT_GT(share_beyond_4(heavy.v), 1.5e-3) << "seed " << seed;
  EXPECT_LT(share_beyond_4(normal.v), 4e-4) << "seed " << seed;
}

// With the call's video geometry, a query's scores fall off with the 3D distance to the key: its
// neighbours in space and time (one step along any axis) keep most of what the query scores against
// its own position over keys far away, in every head, and a token's own frame, row and column, not
// its index, decide it. The fall-off is measured against the head's own scale (the query's score at
// its own position less its score at the far corner): a head's magnitude is drawn log-normally, so
// a broad, flat head scores every key within a fraction of a unit, and a fixed margin in score
// units failed about one run in ten on such heads. Each of a head's three correlation lengths is at
// least one step, so a neighbour keeps about exp(-1/2) = 0.61 of the scale at worst (0.65 was the
// least of 1200 heads drawn); the opposite corner lies at least 6, 8 and 8 steps away, past the
// longest length (6), so it is far for every head.
TEST(ActivationGenerator, VideoTokensAttendToTheirNeighboursInSpaceAndTime) {
  const auto seed = fresh_seed();
  const VideoGeometry g{12, 16, 16};
  ActivationKey k = key(seed);
  k.video = g;
  const int heads = 4, dim = 64;
  const Qkv t = generate(k, DType::kFloat32, heads, heads, dim, static_cast<int>(g.tokens()));
  auto token = [&](std::int64_t f, std::int64_t y, std::int64_t x) { return (f * g.height + y) * g.width + x; };
  auto dot = [&](std::int64_t i, std::int64_t j, int h) {
    double s = 0.0;
    for (int e = 0; e < dim; ++e)
      s += t.q.get((i * heads + h) * dim + e) * t.k.get((j * heads + h) * dim + e);
    return s / std::sqrt(static_cast<double>(dim));
  };
  for (int h = 0; h < heads; ++h) {
    double near = 0.0, far = 0.0, self = 0.0;
    int near_n = 0, far_n = 0;
    for (std::int64_t f = 1; f + 1 < g.frames; ++f)
      for (std::int64_t y = 1; y + 1 < g.height; ++y)
        for (std::int64_t x = 1; x + 1 < g.width; ++x) {
          const std::int64_t i = token(f, y, x);
          self += dot(i, i, h);
          for (std::int64_t j : {token(f - 1, y, x), token(f + 1, y, x), token(f, y - 1, x), token(f, y + 1, x),
                                 token(f, y, x - 1), token(f, y, x + 1)}) {
            near += dot(i, j, h);
            ++near_n;
          }
          // The opposite corner of the video: at least half of every extent away.
          far += dot(i, token(f < g.frames / 2 ? g.frames - 1 : 0, y < g.height / 2 ? g.height - 1 : 0,
                              x < g.width / 2 ? g.width - 1 : 0), h);
          ++far_n;
        }
    near /= near_n, far /= far_n, self /= far_n;
    EXPECT_GT(self, far) << "head " << h << " (seed " << seed << ")";
    EXPECT_GT(near - far, 0.5 * (self - far))
        << "head " << h << ": near " << near << ", far " << far << ", own position " << self << " (seed " << seed << ")";
  }
}

// Where a video head attends most: for nearly every sampled query, its highest-scoring key lies
// within two latent steps along each axis, in every head. Outlier channels that varied with
// position (or carried noise times their gain) broke this on sharp heads, which then put their
// attention on a few far keys that no block-sparse selection from cube means can find.
TEST(ActivationGenerator, EveryVideoHeadsBestKeyIsNearTheQuery) {
  const auto seed = fresh_seed();
  const VideoGeometry g{8, 16, 32};
  ActivationKey k = key(seed);
  k.video = g;
  const int heads = 4, dim = 128, queries = 48;
  const Qkv t = generate(k, DType::kBFloat16, heads, heads, dim, static_cast<int>(g.tokens()));
  const std::int64_t n = g.tokens();
  std::vector<float> q(t.q.numel()), kk(t.k.numel());
  for (std::int64_t i = 0; i < t.q.numel(); ++i) q[i] = t.q.get(i), kk[i] = t.k.get(i);
  for (int h = 0; h < heads; ++h) {
    int near = 0;
    for (int s = 0; s < queries; ++s) {
      const std::int64_t i = (s * 7919 + 13) % n;
      double best = -INFINITY;
      std::int64_t best_key = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        double d = 0.0;
        for (int e = 0; e < dim; ++e) d += q[(i * heads + h) * dim + e] * kk[(j * heads + h) * dim + e];
        if (d > best) best = d, best_key = j;
      }
      const std::int64_t plane = g.height * g.width;
      near += std::abs(i / plane - best_key / plane) <= 2 &&
              std::abs(i / g.width % g.height - best_key / g.width % g.height) <= 2 &&
              std::abs(i % g.width - best_key % g.width) <= 2;
    }
    EXPECT_GE(near, queries * 17 / 20) << "head " << h << ": " << near << " of " << queries << " (seed " << seed << ")";
  }
}

}  // namespace
}  // namespace diffattn::runner
