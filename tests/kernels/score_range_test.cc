// Inputs near float32's largest values: the CPU kernel refuses them instead of returning zeros and
// LSE -inf, and still computes large inputs whose scores stay inside float32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/cpu/score_range.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "parity/parity_check.h"

namespace diffattn {
namespace {

using testing::ParityCase;

ParityCase lse_case(DType dtype) {
  ParityCase c;
  c.dtype = dtype;
  c.seq_q = 9, c.seq_kv = 11, c.head_size = c.head_size_v = 32, c.lse = true;
  return c;
}

void fill(const TensorView& t, std::mt19937_64& rng, double magnitude) {
  testing::fill_normal(t, rng, 1.0);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  testing::for_each_offset(t, [&](std::int64_t off) { testing::write_element(t, off, uniform(rng) * magnitude); });
}

TEST(ScoreRange, FiniteInputsWhoseScoresOverflowAreRefusedNotZeroed) {
  std::mt19937_64 rng(std::random_device{}());
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    auto data = testing::make_case_data(lse_case(dtype), rng);
    AttentionProblem& p = data->problem;
    fill(p.q, rng, 3e38);
    fill(p.k, rng, 3e38);
    testing::poison(p.out);
    const Status s = run_sdpa_cpu(p);
    ASSERT_EQ(s.code(), ErrorCode::kInvalidInput) << dtype_name(dtype) << ": " << s.ToString();
    EXPECT_NE(s.message().find("too large for float32 attention scores"), std::string::npos) << s.message();
  }
}

TEST(ScoreRange, HugeValuesAccumulatedOverManyKeysAreRefused) {
  std::mt19937_64 rng(std::random_device{}());
  auto data = testing::make_case_data(lse_case(DType::kFloat32), rng);
  fill(data->problem.v, rng, 1e38);
  const Status s = check_scores_fit_float32(data->problem);
  ASSERT_EQ(s.code(), ErrorCode::kInvalidInput) << s.ToString();
  EXPECT_NE(s.message().find("v is too large for float32 output sums"), std::string::npos) << s.message();
}

TEST(ScoreRange, LargeInputsInsideTheRangeStillMatchTheOracle) {
  std::mt19937_64 rng(std::random_device{}());
  auto data = testing::make_case_data(lse_case(DType::kFloat32), rng);
  AttentionProblem& p = data->problem;
  // scale·‖q‖·‖k‖ about 1e35: far from float32's limit, far outside what softmax usually sees.
  fill(p.q, rng, 1e17);
  fill(p.k, rng, 1e17);
  fill(p.v, rng, 1e30);
  ASSERT_TRUE(check_scores_fit_float32(p).ok()) << check_scores_fit_float32(p).message();
  testing::OracleOutput truth = testing::reference_attention(p, testing::OraclePrecision::kFloat64);
  ASSERT_TRUE(run_sdpa_cpu(p).ok());
  // Relative to the magnitudes involved: fp32 scores of ~1e34 carry absolute errors far above 1.
  double out_scale = 0, out_error = 0, lse_error = 0;
  for (std::int64_t i = 0; i < p.q.size(1); ++i)
    for (std::int64_t h = 0; h < p.q.size(2); ++h) {
      const double lse = testing::read_element(*p.lse, testing::element_offset(*p.lse, {0, h, i}));
      lse_error = std::max(lse_error, std::fabs(lse - truth.lse_at(0, h, i)) / std::fabs(truth.lse_at(0, h, i)));
      for (std::int64_t e = 0; e < p.v.size(3); ++e) {
        const double out = testing::read_element(p.out, testing::element_offset(p.out, {0, i, h, e}));
        ASSERT_TRUE(std::isfinite(out));
        out_scale = std::max(out_scale, std::fabs(truth.at(0, i, h, e)));
        out_error = std::max(out_error, std::fabs(out - truth.at(0, i, h, e)));
      }
    }
  EXPECT_LE(out_error, 1e-3 * out_scale);
  EXPECT_LE(lse_error, 1e-4);
}

TEST(ScoreRange, OrdinaryInputsPass) {
  std::mt19937_64 rng(std::random_device{}());
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    auto data = testing::make_case_data(lse_case(dtype), rng);
    EXPECT_TRUE(check_scores_fit_float32(data->problem).ok()) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace diffattn
