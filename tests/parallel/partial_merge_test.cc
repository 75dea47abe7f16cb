#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/merge/partial_merge.h"

namespace diffattn::merge {
namespace {

// Softmax-weighted sums of random scores over a key range, with their LSE, in float64.
struct Partial {
  std::vector<double> out, lse;
};

Partial attend(const std::vector<double>& scores, const std::vector<double>& values, int rows, int keys, int dv, int k0,
               int k1) {
  Partial p{std::vector<double>(rows * dv, 0), std::vector<double>(rows, -INFINITY)};
  for (int r = 0; r < rows; ++r) {
    if (k0 == k1) continue;
    double m = -INFINITY;
    for (int k = k0; k < k1; ++k) m = std::max(m, scores[r * keys + k]);
    double sum = 0;
    for (int k = k0; k < k1; ++k) sum += std::exp(scores[r * keys + k] - m);
    for (int k = k0; k < k1; ++k)
      for (int d = 0; d < dv; ++d) p.out[r * dv + d] += std::exp(scores[r * keys + k] - m) / sum * values[k * dv + d];
    p.lse[r] = m + std::log(sum);
  }
  return p;
}

TEST(PartialMerge, MergingKeyBlocksByLseEqualsAttentionOverAllKeys) {
  // Rows are (s, h) with B = 1, S = 3, H = 2; lse is [H, S], outputs [S, H, Dv].
  const int s = 3, h = 2, rows = s * h, keys = 40, dv = 5;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n(0, 3);
  std::vector<double> scores(rows * keys), values(keys * dv);
  for (double& x : scores) x = n(rng);
  for (double& x : values) x = n(rng);
  const Partial full = attend(scores, values, rows, keys, dv, 0, keys);
  const int cuts[] = {0, 7, 7, 23, 40};  // one empty block (LSE -inf) among them
  std::vector<float> acc(rows * dv, 0.f), acc_lse(rows, -std::numeric_limits<float>::infinity());
  for (int i = 0; i + 1 < 5; ++i) {
    const Partial p = attend(scores, values, rows, keys, dv, cuts[i], cuts[i + 1]);
    std::vector<float> part(p.out.begin(), p.out.end()), part_lse(rows);
    for (int si = 0; si < s; ++si)
      for (int hi = 0; hi < h; ++hi) part_lse[hi * s + si] = static_cast<float>(p.lse[si * h + hi]);
    PartialMergeParams m{acc.data(), acc_lse.data(), part.data(), DType::kFloat32, part_lse.data(), 1, s, h, dv};
    ASSERT_TRUE(merge_partial_cpu(m).ok());
  }
  for (int si = 0; si < s; ++si)
    for (int hi = 0; hi < h; ++hi) {
      const int row = si * h + hi;
      EXPECT_NEAR(acc_lse[hi * s + si], full.lse[row], 1e-4);
      for (int d = 0; d < dv; ++d) EXPECT_NEAR(acc[row * dv + d], full.out[row * dv + d], 1e-4);
    }
}

TEST(PartialMerge, RowsWithoutKeysStayZeroAndBadParamsAreRefused) {
  std::vector<float> acc(4, 0.f), lse(1, -INFINITY), part(4, 1.f), plse(1, -INFINITY);
  PartialMergeParams m{acc.data(), lse.data(), part.data(), DType::kFloat32, plse.data(), 1, 1, 1, 4};
  ASSERT_TRUE(merge_partial_cpu(m).ok());
  for (float x : acc) EXPECT_EQ(x, 0.f);
  EXPECT_TRUE(std::isinf(lse[0]));
  m.part_dtype = DType::kInt8;
  EXPECT_EQ(merge_partial_cpu(m).code(), ErrorCode::kInvalidInput);
  m.part_dtype = DType::kFloat32;
  m.acc_out = nullptr;
  EXPECT_EQ(merge_partial_cpu(m).code(), ErrorCode::kInvalidInput);
  std::vector<std::uint16_t> half(4);
  EXPECT_TRUE(store_merged_cpu(part.data(), half.data(), DType::kBFloat16, 4).ok());
  EXPECT_EQ(half[0], 0x3f80);  // 1.0 in bfloat16
}

}  // namespace
}  // namespace diffattn::merge
