#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runner/quality_metrics.h"

namespace diffattn::runner {
namespace {

HostTensor tensor(std::initializer_list<float> values, DType dtype = DType::kFloat32) {
  HostTensor t(dtype, {1, static_cast<std::int64_t>(values.size()), 1, 1});
  std::int64_t i = 0;
  for (float v : values) t.set(i++, v);
  return t;
}

TEST(QualityMetrics, MatchesHandComputedValues) {
  // diff = (0, 0, 0, -1): ||diff|| = 1, ||ref|| = sqrt(39), <out, ref> = 34, ||out|| = sqrt(30).
  const QualityMetrics m = compare_outputs(tensor({1, 2, 3, 4}), tensor({1, 2, 3, 5}));
  EXPECT_NEAR(m.rel_l2, 1.0 / std::sqrt(39.0), 1e-12);
  EXPECT_NEAR(m.cosine, 34.0 / std::sqrt(30.0 * 39.0), 1e-12);
  EXPECT_DOUBLE_EQ(m.max_abs, 1.0);
  ASSERT_TRUE(m.psnr_db.has_value());
  EXPECT_NEAR(*m.psnr_db, 20.0, 1e-9);  // peak^2 = 25, mse = 1/4: 10 log10(100)
  EXPECT_EQ(m.elements, 4);
  EXPECT_EQ(m.non_finite, 0);
}

TEST(QualityMetrics, NegativeValuesAndBf16) {
  // bf16 holds these exactly: diff = (0.5, -0.5), ref = (-2, 2).
  const QualityMetrics m = compare_outputs(tensor({-1.5f, 1.5f}, DType::kBFloat16), tensor({-2.f, 2.f}, DType::kBFloat16));
  EXPECT_NEAR(m.rel_l2, 0.25, 1e-12);
  EXPECT_NEAR(m.cosine, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(m.max_abs, 0.5);
  EXPECT_NEAR(*m.psnr_db, 10.0 * std::log10(4.0 / 0.25), 1e-9);
}

TEST(QualityMetrics, IdenticalOutputsHaveNoPsnr) {
  const QualityMetrics m = compare_outputs(tensor({0.5f, -3.f, 7.f}), tensor({0.5f, -3.f, 7.f}));
  EXPECT_EQ(m.rel_l2, 0.0);
  EXPECT_NEAR(m.cosine, 1.0, 1e-15);
  EXPECT_FALSE(m.psnr_db.has_value());
  EXPECT_TRUE(within_bound(m, 1e-6));
}

TEST(QualityMetrics, NonFiniteOutputFailsEveryBound) {
  const QualityMetrics m =
      compare_outputs(tensor({1.f, std::numeric_limits<float>::quiet_NaN(), 3.f}), tensor({1.f, 2.f, 3.f}));
  EXPECT_EQ(m.non_finite, 1);
  EXPECT_FALSE(within_bound(m, 1e9));
}

TEST(QualityMetrics, MergeKeepsTheWorst) {
  QualityMetrics total;
  merge_worst(total, compare_outputs(tensor({1, 2}), tensor({1, 2.5f})));
  const double first = total.rel_l2;
  merge_worst(total, compare_outputs(tensor({1, 1}), tensor({1, 3})));
  EXPECT_GT(total.rel_l2, first);
  EXPECT_NEAR(total.max_abs, 2.0, 1e-12);
  EXPECT_EQ(total.elements, 4);
  merge_worst(total, compare_outputs(tensor({1, 2}), tensor({1, 2})));
  EXPECT_NEAR(total.max_abs, 2.0, 1e-12);
}

TEST(QualityMetrics, BoundIsOnRelativeL2) {
  const QualityMetrics m = compare_outputs(tensor({1, 2, 3, 4}), tensor({1, 2, 3, 5}));
  EXPECT_TRUE(within_bound(m, 0.2));
  EXPECT_FALSE(within_bound(m, 0.1));
  const auto j = quality_to_json(m);
  EXPECT_NEAR(j.at("rel_l2").get<double>(), m.rel_l2, 1e-15);
  EXPECT_TRUE(quality_to_json(compare_outputs(tensor({1}), tensor({1}))).at("psnr_db").is_null());
}

}  // namespace
}  // namespace diffattn::runner
