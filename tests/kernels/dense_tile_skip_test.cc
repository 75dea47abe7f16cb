// The CPU kernel skips key tiles that a mask empties for a query block: it neither reads their K/V
// nor changes the arithmetic of the tiles it computes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/cpu/sdpa_cpu.h"
#include "parity/parity_check.h"

namespace diffattn {
namespace {

using testing::ParityCase;

std::vector<double> values(const TensorView& t) {
  std::vector<double> out;
  testing::for_each_offset(t, [&](std::int64_t off) { out.push_back(testing::read_element(t, off)); });
  return out;
}

ParityCase dense_case() {
  ParityCase c;
  c.dtype = DType::kFloat16;
  c.batch = 2, c.seq_q = 150, c.seq_kv = 320, c.heads_q = 4, c.heads_kv = 2, c.head_size = c.head_size_v = 64;
  c.mask = testing::MaskShape::kDense;
  c.lse = true;
  return c;
}

// Keys [128, 256) are hidden from every row by a per-row mask and hold NaN values: a kernel that
// computed their tiles would multiply NaN by a zero probability and return NaN.
TEST(DenseTileSkip, TilesAPerRowMaskEmptiesAreNotRead) {
  std::random_device source;
  const std::uint64_t seed = (static_cast<std::uint64_t>(source()) << 32) | source();
  std::mt19937_64 rng(seed);
  auto data = testing::make_case_data(dense_case(), rng);
  AttentionProblem& p = data->problem;
  const ParityCase& c = data->c;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t j = 128; j < 256; ++j) {
      for (std::int64_t h = 0; h < c.heads_q; ++h)
        for (std::int64_t i = 0; i < c.seq_q; ++i)
          testing::write_element(*p.mask, testing::element_offset(*p.mask, {b, h, i, j}), 0.0);
      for (std::int64_t h = 0; h < c.heads_kv; ++h)
        for (std::int64_t e = 0; e < c.head_size_v; ++e)
          testing::write_element(p.v, testing::element_offset(p.v, {b, j, h, e}), std::nan(""));
    }
  // The oracle reads the same mask with the hidden values zeroed.
  auto clean = testing::make_case_data(dense_case(), rng);
  // Same inputs: copy q, k, mask and v, with zeros where v is NaN.
  for (const auto& pair : {std::pair{&p.q, &clean->problem.q}, {&p.k, &clean->problem.k}, {&p.v, &clean->problem.v}}) {
    const TensorView& from = *pair.first;  // named, not bound: clang 14 cannot capture structured bindings
    TensorView& to = *pair.second;
    testing::for_each_offset(from, [&](std::int64_t off) {
      const double x = testing::read_element(from, off);
      testing::write_element(to, off, std::isnan(x) ? 0.0 : x);
    });
  }
  testing::for_each_offset(*p.mask, [&](std::int64_t off) {
    testing::write_element(*clean->problem.mask, off, testing::read_element(*p.mask, off));
  });
  testing::Expectation expected = testing::expect(clean->problem);
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!cpu_isa_available(isa)) continue;
    testing::poison(p.out), testing::poison(*p.lse);
    ASSERT_TRUE(run_sdpa_cpu(p, isa).ok());
    EXPECT_EQ(testing::compare(p, expected), "") << cpu_isa_name(isa) << " (seed " << seed << ")";
    testing::poison(clean->problem.out), testing::poison(*clean->problem.lse);
    ASSERT_TRUE(run_sdpa_cpu(clean->problem, isa).ok());
    EXPECT_EQ(values(p.out), values(clean->problem.out)) << cpu_isa_name(isa);
    EXPECT_EQ(values(*p.lse), values(*clean->problem.lse)) << cpu_isa_name(isa);
  }
}

// A dense mask whose rows are all the same takes the per-row path; the key-padding mask with those
// rows takes the row-invariant one, which always skipped empty tiles. Both give the same bits.
TEST(DenseTileSkip, SkippingLeavesTheArithmeticOfComputedTilesUnchanged) {
  std::random_device source;
  const std::uint64_t seed = (static_cast<std::uint64_t>(source()) << 32) | source();
  std::mt19937_64 rng(seed);
  ParityCase padded = dense_case();
  padded.mask = testing::MaskShape::kKeyPadding;
  auto data = testing::make_case_data(padded, rng);
  AttentionProblem& p = data->problem;
  for (std::int64_t b = 0; b < padded.batch; ++b)  // empty tiles among random keys
    for (std::int64_t j = 64; j < 192; ++j) testing::write_element(*p.mask, testing::element_offset(*p.mask, {b, j}), 0.0);
  testing::HostBuffer dense_buf(DType::kBool, padded.batch * padded.seq_q * padded.seq_kv);
  TensorView dense = TensorView::Contiguous(dense_buf.data(), DType::kBool, {padded.batch, 1, padded.seq_q, padded.seq_kv});
  for (std::int64_t b = 0; b < padded.batch; ++b)
    for (std::int64_t i = 0; i < padded.seq_q; ++i)
      for (std::int64_t j = 0; j < padded.seq_kv; ++j)
        testing::write_element(dense, testing::element_offset(dense, {b, 0, i, j}),
                               testing::read_element(*p.mask, testing::element_offset(*p.mask, {b, j})));
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!cpu_isa_available(isa)) continue;
    AttentionProblem row_invariant = p;
    testing::poison(p.out), testing::poison(*p.lse);
    ASSERT_TRUE(run_sdpa_cpu(row_invariant, isa).ok());
    const std::vector<double> out = values(p.out), lse = values(*p.lse);
    AttentionProblem per_row = p;
    per_row.mask = dense;
    testing::poison(p.out), testing::poison(*p.lse);
    ASSERT_TRUE(run_sdpa_cpu(per_row, isa).ok());
    EXPECT_EQ(values(p.out), out) << cpu_isa_name(isa) << " (seed " << seed << ")";
    EXPECT_EQ(values(*p.lse), lse) << cpu_isa_name(isa) << " (seed " << seed << ")";
  }
}

}  // namespace
}  // namespace diffattn
