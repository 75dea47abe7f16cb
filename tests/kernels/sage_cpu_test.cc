// SAGE_ATTN's CPU implementation against the float64 oracle: its accuracy on random and DiT-like
// inputs (stated bounds below), the accurate mode's advantage, padding keys that cannot reach valid
// rows, fully masked rows, and its refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/sage_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/sage_test_lists.h"
#include "parity/cases.h"
#include "parity/oracle.h"
#include "parity/quantized_tolerance.h"

namespace diffattn {
namespace {

using sage::PvMode;
using testing::MaskShape;
using testing::ParityCase;

// Stated accuracy of the CPU implementation against float64 attention: relative L2 error over the
// whole output and cosine similarity, per P*V mode. On random inputs the FP8 rounding of P costs
// about 3.5 % relative L2 and the accurate mode about 1 %. On DiT-like inputs the outlier channels
// set each 16-row Q group's INT8 step, which costs both modes about 3-4 % and moves the worst row's
// LSE by up to about 1 (scores reach tens in log2 units); the bounds leave about 1.5x over what was
// measured.
struct Bounds {
  double fp8_rel_l2, fp8_cosine, fp16_rel_l2, fp16_cosine, lse;
  // The accurate mode's error against the FP8 mode's: at most fp16_share of it in every case, and
  // below fp16_total_share of it summed over the cases. On DiT-like inputs the INT8 Q K^T error,
  // which both modes share, dominates, and one case in a few hundred has the FP8 mode's own error
  // land a little below the accurate mode's (seen: 0.0277 against 0.0287 in a causal bf16 hd64
  // case); over the four cases the accurate mode stays clearly ahead (ratios 0.8-0.85 typically).
  double fp16_share, fp16_total_share;
};
constexpr Bounds kRandomBounds{0.06, 0.998, 0.02, 0.9998, testing::kQuantizedMaxLseError, 0.5, 0.5};
constexpr Bounds kDitLikeBounds{0.07, 0.998, 0.065, 0.998, 1.5, 1.1, 0.95};

std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
}

ParityCase sage_case(DType dtype, std::int64_t seq_q, std::int64_t seq_kv, std::int64_t head_size) {
  ParityCase c;
  c.dtype = dtype, c.batch = 2, c.seq_q = seq_q, c.seq_kv = seq_kv, c.heads_q = 4, c.heads_kv = 2;
  c.head_size = c.head_size_v = head_size;
  c.lse = true;
  return c;
}

// What makes 8-bit attention hard in DiT activations: a large per-channel offset in K (which
// smoothing removes), a few outlier channels in Q and K, and heavy-tailed V (Student t, 3 dof).
void make_dit_like(const AttentionProblem& p, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::student_t_distribution<double> heavy(3.0);
  const std::int64_t d = p.q.size(3);
  std::vector<double> k_offset(static_cast<std::size_t>(d)), outlier(static_cast<std::size_t>(d), 1.0);
  for (auto& o : k_offset) o = 4.0 * normal(rng);
  for (int n = 0; n < 4; ++n) outlier[static_cast<std::size_t>(rng() % d)] = 8.0;
  auto fill = [&](const TensorView& t, bool is_k, bool is_v) {
    for (std::int64_t b = 0; b < t.size(0); ++b)
      for (std::int64_t s = 0; s < t.size(1); ++s)
        for (std::int64_t h = 0; h < t.size(2); ++h)
          for (std::int64_t e = 0; e < t.size(3); ++e) {
            double x = is_v ? heavy(rng) : normal(rng) * outlier[static_cast<std::size_t>(e)];
            if (is_k) x += k_offset[static_cast<std::size_t>(e)];
            testing::write_element(t, testing::element_offset(t, {b, s, h, e}), x);
          }
  };
  fill(p.q, false, false);
  fill(p.k, true, false);
  fill(p.v, false, true);
}

testing::Agreement run_and_compare(const AttentionProblem& p, PvMode pv, testing::OracleOutput& truth) {
  testing::poison(p.out);
  if (p.lse) testing::poison(*p.lse);
  const Status status = sage::run_sage_attn_cpu(p, pv);
  EXPECT_TRUE(status.ok()) << status.message();
  return testing::agreement(p, truth);
}

struct Shape {
  DType dtype;
  std::int64_t seq_q, seq_kv, head_size;
  bool causal;
  MaskShape mask;
};

const Shape kShapes[] = {
    {DType::kBFloat16, 300, 300, 128, false, MaskShape::kNone},
    {DType::kFloat16, 200, 333, 64, false, MaskShape::kKeyPadding},  // Sq != Skv, padding, GQA
    {DType::kBFloat16, 257, 190, 64, true, MaskShape::kNone},        // causal, partial blocks
    {DType::kFloat16, 129, 129, 128, true, MaskShape::kKeyPadding},
};

void expect_accuracy(bool dit_like) {
  const Bounds& bound = dit_like ? kDitLikeBounds : kRandomBounds;
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  double fp8_total = 0.0, fp16_total = 0.0;
  for (const Shape& s : kShapes) {
    ParityCase c = sage_case(s.dtype, s.seq_q, s.seq_kv, s.head_size);
    c.causal = s.causal, c.mask = s.mask;
    auto data = testing::make_case_data(c, rng);
    if (dit_like) make_dit_like(data->problem, rng);
    testing::OracleOutput truth = testing::reference_attention(data->problem, testing::OraclePrecision::kFloat64);
    const testing::Agreement fp8 = run_and_compare(data->problem, PvMode::kFp8, truth);
    const testing::Agreement fp16 = run_and_compare(data->problem, PvMode::kFp16, truth);
    std::printf("[  SAGE    ] %s%s: fp8 relL2 %.4f cos %.6f lse %.4f | fp16 relL2 %.4f cos %.6f lse %.4f\n",
                dit_like ? "dit-like " : "random ", c.name().c_str(), fp8.rel_l2, fp8.cosine, fp8.lse, fp16.rel_l2,
                fp16.cosine, fp16.lse);
    SCOPED_TRACE(c.name() + " seed " + std::to_string(seed));
    EXPECT_LE(fp8.rel_l2, bound.fp8_rel_l2);
    EXPECT_GE(fp8.cosine, bound.fp8_cosine);
    EXPECT_LE(fp16.rel_l2, bound.fp16_rel_l2);
    EXPECT_GE(fp16.cosine, bound.fp16_cosine);
    // FP8: the LSE of the E4M3 P that multiplied V (its row sums); FP16: of unquantized P.
    EXPECT_LE(fp8.lse, bound.lse);
    EXPECT_LE(fp16.lse, bound.lse);
    EXPECT_TRUE(fp8.masked_rows_exact && fp16.masked_rows_exact);
    EXPECT_LT(fp16.rel_l2, bound.fp16_share * fp8.rel_l2) << "the accurate mode must be more accurate";
    fp8_total += fp8.rel_l2;
    fp16_total += fp16.rel_l2;
  }
  EXPECT_LT(fp16_total, bound.fp16_total_share * fp8_total)
      << "the accurate mode must be more accurate over the cases; seed " << seed;
}

TEST(SageCpu, CloseToFloat64AttentionOnRandomInputs) { expect_accuracy(false); }

TEST(SageCpu, CloseToFloat64AttentionOnDitLikeInputsWithKeyOffsetsAndOutliers) { expect_accuracy(true); }

TEST(SageCpu, PaddingKeysWithHugeValuesDoNotChangeValidRows) {
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (PvMode pv : {PvMode::kFp8, PvMode::kFp16}) {
    ParityCase c = sage_case(DType::kFloat16, 70, 200, 128);
    c.mask = MaskShape::kKeyPadding;
    auto data = testing::make_case_data(c, rng);
    const AttentionProblem& p = data->problem;
    ASSERT_TRUE(sage::run_sage_attn_cpu(p, pv).ok());
    std::vector<double> before;
    testing::for_each_offset(p.out, [&](std::int64_t off) { before.push_back(testing::read_element(p.out, off)); });
    std::uniform_real_distribution<double> huge(-60000.0, 60000.0);
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t j = 0; j < 200; ++j) {
        if (testing::read_element(*p.mask, b * 200 + j) != 0.0) continue;
        for (std::int64_t h = 0; h < 2; ++h)
          for (std::int64_t e = 0; e < 128; ++e) {
            testing::write_element(p.k, testing::element_offset(p.k, {b, j, h, e}), huge(rng));
            testing::write_element(p.v, testing::element_offset(p.v, {b, j, h, e}), huge(rng));
          }
      }
    testing::poison(p.out);
    ASSERT_TRUE(sage::run_sage_attn_cpu(p, pv).ok());
    std::size_t at = 0;
    testing::for_each_offset(p.out, [&](std::int64_t off) {
      const double now = testing::read_element(p.out, off);
      ASSERT_TRUE(std::isfinite(now));
      ASSERT_EQ(now, before[at++]) << "seed " << seed;
    });
  }
}

TEST(SageCpu, RowsWithoutValidKeysGiveZerosAndNegativeInfinityLse) {
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  ParityCase c = sage_case(DType::kBFloat16, 40, 150, 64);
  c.mask = MaskShape::kKeyPadding;
  c.fully_masked_rows = true;  // the last batch keeps no key
  c.causal = true;
  auto data = testing::make_case_data(c, rng);
  testing::OracleOutput truth = testing::reference_attention(data->problem, testing::OraclePrecision::kFloat64);
  for (PvMode pv : {PvMode::kFp8, PvMode::kFp16}) {
    const testing::Agreement a = run_and_compare(data->problem, pv, truth);
    EXPECT_TRUE(a.masked_rows_exact) << "seed " << seed;
    for (std::int64_t h = 0; h < 4; ++h)
      for (std::int64_t i = 0; i < 40; ++i)
        EXPECT_EQ(testing::read_element(*data->problem.lse, testing::element_offset(*data->problem.lse, {1, h, i})),
                  -INFINITY);
  }
}

TEST(SageCpu, RefusesWhatItDoesNotComputeBeforeWriting) {
  std::mt19937_64 rng(fresh_seed());
  ParityCase dense = sage_case(DType::kBFloat16, 20, 20, 64);
  dense.mask = MaskShape::kDense;
  ParityCase fp32 = sage_case(DType::kFloat32, 20, 20, 64);
  ParityCase packed = sage_case(DType::kFloat16, 40, 40, 64);
  packed.varlen = true;
  ParityCase wide_v = sage_case(DType::kFloat16, 20, 30, 64);
  wide_v.head_size_v = 128;
  for (const ParityCase& c : {dense, fp32, packed, wide_v}) {
    auto data = testing::make_case_data(c, rng);
    const Status status = sage::run_sage_attn_cpu(data->problem, PvMode::kFp8);
    EXPECT_EQ(status.code(), ErrorCode::kUnsupported) << c.name();
    EXPECT_NE(status.message().find("TORCH_SDPA"), std::string::npos) << status.message();
    bool untouched = true;
    testing::for_each_offset(data->problem.out, [&](std::int64_t off) {
      untouched = untouched && std::isnan(testing::read_element(data->problem.out, off));
    });
    EXPECT_TRUE(untouched) << c.name();
  }
}

std::vector<double> values_of(const TensorView& t) {
  std::vector<double> v;
  testing::for_each_offset(t, [&](std::int64_t off) { v.push_back(testing::read_element(t, off)); });
  return v;
}

// With every tile listed, the walk visits the dense arithmetic's blocks in its order: the same bits.
TEST(SageBlockSparseCpu, EveryTileListedIsTheDenseArithmeticBitForBit) {
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const ParityCase& c : {sage_case(DType::kBFloat16, 300, 300, 128), sage_case(DType::kFloat16, 200, 333, 64)}) {
    auto data = testing::make_case_data(c, rng);
    make_dit_like(data->problem, rng);
    const BlockSparseLayout full =
        full_block_sparse_layout(c.batch, c.heads_q, c.seq_q, c.seq_kv, sage::kKvBlock, sage::kKvBlock);
    for (PvMode pv : {PvMode::kFp8, PvMode::kFp16}) {
      ASSERT_TRUE(sage::run_sage_attn_cpu(data->problem, pv).ok());
      const std::vector<double> dense_out = values_of(data->problem.out), dense_lse = values_of(*data->problem.lse);
      testing::poison(data->problem.out);
      testing::poison(*data->problem.lse);
      const Status s = sage::run_sage_block_sparse_cpu(data->problem, full, pv);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(values_of(data->problem.out), dense_out) << c.name() << " seed " << seed;
      EXPECT_EQ(values_of(*data->problem.lse), dense_lse) << c.name() << " seed " << seed;
    }
  }
}

// Against block-sparse attention in the inputs' precision on the same lists: the 8-bit bounds of
// the dense arithmetic (kRandomBounds); rows with an empty list give zeros and LSE -inf; rows past
// a padded tile's valid rows are left as they were, and its padding keys are never attended.
TEST(SageBlockSparseCpu, ListedKeysMatchBlockSparseAttentionWithinTheEightBitBounds) {
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  ParityCase c = sage_case(DType::kBFloat16, 128 * 5, 128 * 5, 64);
  for (PvMode pv : {PvMode::kFp8, PvMode::kFp16}) {
    auto data = testing::make_case_data(c, rng);
    AttentionProblem& p = data->problem;
    BlockSparseLayout lists = testing::random_sage_lists(c, 0.5, 7, rng);
    for (std::int64_t t = 0; t < lists.q_tiles; ++t) lists.tile_rows.push_back(t % 2 ? 1 + rng() % 127 : 128);
    ASSERT_TRUE(run_block_sparse_cpu(p, lists).ok());
    const std::vector<double> want = values_of(p.out);
    testing::poison(p.out);
    testing::poison(*p.lse);
    const Status s = sage::run_sage_block_sparse_cpu(p, lists, pv);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::vector<double> got = values_of(p.out);
    double err = 0, norm = 0, dot = 0, got_norm = 0;
    std::size_t at = 0;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < c.seq_q; ++i)
        for (std::int64_t h = 0; h < c.heads_q; ++h) {
          const std::int64_t t = i / 128, row = lists.row(b, h, t);
          const bool padding = i - t * 128 >= lists.tile_rows[static_cast<std::size_t>(t)];
          const auto r = static_cast<std::size_t>(row);
          const bool empty = lists.offsets[r] == lists.offsets[r + 1];
          const double lse = testing::read_element(*p.lse, testing::element_offset(*p.lse, {b, h, i}));
          if (padding) EXPECT_TRUE(std::isnan(lse)) << "a padding row was written";
          if (empty && !padding) EXPECT_EQ(lse, -INFINITY);
          for (std::int64_t e = 0; e < c.head_size_v; ++e, ++at) {
            if (padding) continue;
            if (empty) EXPECT_EQ(got[at], 0.0);
            err += (got[at] - want[at]) * (got[at] - want[at]);
            norm += want[at] * want[at];
            dot += got[at] * want[at];
            got_norm += got[at] * got[at];
          }
        }
    const double rel_l2 = std::sqrt(err / norm), cosine = dot / std::sqrt(norm * got_norm);
    std::printf("[  SAGE    ] block-sparse %s: relL2 %.4f cos %.6f\n", pv == PvMode::kFp8 ? "fp8" : "fp16", rel_l2,
                cosine);
    EXPECT_LE(rel_l2, pv == PvMode::kFp8 ? kRandomBounds.fp8_rel_l2 : kRandomBounds.fp16_rel_l2) << "seed " << seed;
    EXPECT_GE(cosine, pv == PvMode::kFp8 ? kRandomBounds.fp8_cosine : kRandomBounds.fp16_cosine) << "seed " << seed;
  }
}

TEST(SageBlockSparseCpu, RefusesListsItCannotWalk) {
  std::mt19937_64 rng(fresh_seed());
  const ParityCase c = sage_case(DType::kBFloat16, 300, 300, 64);
  auto data = testing::make_case_data(c, rng);
  const BlockSparseLayout small = full_block_sparse_layout(c.batch, c.heads_q, c.seq_q, c.seq_kv, 64, 64);
  EXPECT_EQ(sage::run_sage_block_sparse_cpu(data->problem, small, PvMode::kFp8).code(), ErrorCode::kInvalidInput);
  BlockSparseLayout wrong = full_block_sparse_layout(c.batch, c.heads_q, c.seq_q, c.seq_kv, 128, 128);
  wrong.indices.back() = static_cast<std::int32_t>(wrong.k_tiles);
  EXPECT_EQ(sage::run_sage_block_sparse_cpu(data->problem, wrong, PvMode::kFp8).code(), ErrorCode::kInvalidInput);
  bool untouched = true;
  testing::for_each_offset(data->problem.out, [&](std::int64_t off) {
    untouched = untouched && std::isnan(testing::read_element(data->problem.out, off));
  });
  EXPECT_TRUE(untouched);
}

}  // namespace
}  // namespace diffattn
