// SAGE_ATTN's CPU tile kernel (kernels/cpu/sage_tile_impl.h) against its oracle, the plain loops
// (SageCpuKernel::reference): the branch-free roundings of P equal their definitions, and on
// fresh random inputs every instruction set's kernel gives the reference's output to within the
// order of its sums (both modes, both Q K^T modes, both dtypes, GQA, causal, key padding with rows
// that keep no key, the LSE, block-sparse lists with padded tiles).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/sage_cpu.h"
#include "kernels/cpu/sage_tile_impl.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/quant/fp8_e4m3.h"
#include "kernels/sage_test_lists.h"
#include "parity/cases.h"

namespace diffattn {
namespace {

using sage::PvMode;
using sage::QkMode;
using testing::MaskShape;
using testing::ParityCase;

std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
}

float from_bits(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// Every float from 0 up to `top` at a random stride near `step`, each rounding boundary of the
// target grid (the value halfway between neighbours of the grid, and the floats beside it), and the
// grid points themselves.
template <typename Fast, typename Exact>
void expect_same_rounding(const char* what, float top, std::uint32_t step, const std::vector<float>& grid,
                          const Fast& fast, const Exact& exact) {
  std::mt19937_64 rng(fresh_seed());
  std::uint32_t top_bits;
  std::memcpy(&top_bits, &top, sizeof top_bits);
  std::int64_t mismatches = 0;
  auto check = [&](float x) {
    if (!(x >= 0.0f && x <= top)) return;
    const float a = fast(x), b = exact(x);
    if (std::memcmp(&a, &b, sizeof a) != 0 && ++mismatches <= 5)
      ADD_FAILURE() << what << "(" << x << "): " << a << " against " << b;
  };
  for (std::uint32_t bits = 0; bits <= top_bits; bits += step / 2 + static_cast<std::uint32_t>(rng() % step))
    check(from_bits(bits));
  for (std::size_t i = 0; i + 1 < grid.size(); ++i) {
    const float mid = 0.5f * (grid[i] + grid[i + 1]);
    for (float x : {grid[i], mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) check(x);
  }
  EXPECT_EQ(mismatches, 0) << what;
}

TEST(SageTileCpu, BranchFreeRoundingsOfPEqualTheScalarDefinitions) {
  // E4M3 against the nearest value of its grid (codes 0 .. 0x7e, ascending), ties to the even code.
  std::vector<float> e4m3;
  for (int code = 0; code < 0x7f; ++code) e4m3.push_back(fp8::e4m3_to_float(static_cast<std::uint8_t>(code)));
  const auto nearest_e4m3 = [&](float x) {
    const auto above = std::lower_bound(e4m3.begin(), e4m3.end(), x);
    if (above == e4m3.end()) return e4m3.back();
    if (*above == x || above == e4m3.begin()) return *above;
    const auto hi = static_cast<std::size_t>(above - e4m3.begin()), lo = hi - 1;
    const double up = static_cast<double>(e4m3[hi]) - x, down = x - static_cast<double>(e4m3[lo]);
    return up < down || (up == down && hi % 2 == 0) ? e4m3[hi] : e4m3[lo];
  };
  expect_same_rounding("e4m3", 448.0f, 211, e4m3, fp8::e4m3_round_nonneg, nearest_e4m3);

  std::vector<float> bf16, f16;
  for (std::uint32_t h = 0; h <= 0x3f80u; ++h) bf16.push_back(cpu::bf16_to_float(static_cast<std::uint16_t>(h)));
  for (std::uint32_t h = 0; h <= 0x3c00u; ++h) f16.push_back(cpu::half_to_float(static_cast<std::uint16_t>(h)));
  expect_same_rounding("bf16", 1.0f, 211, bf16, cpu::round_bf16_nonneg,
                       [](float x) { return cpu::bf16_to_float(cpu::float_to_bf16(x)); });
  expect_same_rounding("f16", 1.0f, 211, f16, cpu::round_f16_nonneg,
                       [](float x) { return cpu::half_to_float(cpu::float_to_half(x)); });
}

std::vector<double> values_of(const TensorView& t) {
  std::vector<double> v;
  testing::for_each_offset(t, [&](std::int64_t off) { v.push_back(testing::read_element(t, off)); });
  return v;
}

// The two outputs agree to within the order of their sums: relative L2 below 2e-3 (one output
// element in a few hundred may land one 16-bit step apart), no element more than a few 16-bit steps
// of the row's scale apart, equal zeros and -inf on rows without keys, LSE within 1e-3.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& got_lse,
                  const std::vector<double>& want_lse, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double err = 0, norm = 0, worst = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << ": element " << i << " not written";
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  EXPECT_LE(std::sqrt(err / std::max(norm, 1e-30)), 2e-3) << what;
  EXPECT_LE(worst, 0.05 * scale) << what;
  ASSERT_EQ(got_lse.size(), want_lse.size());
  for (std::size_t i = 0; i < got_lse.size(); ++i) {
    if (std::isinf(want_lse[i])) {
      EXPECT_EQ(got_lse[i], want_lse[i]) << what << ": LSE " << i;
    } else {
      EXPECT_NEAR(got_lse[i], want_lse[i], 1e-3) << what << ": LSE " << i;
    }
  }
}

struct Shape {
  DType dtype;
  std::int64_t batch, seq_q, seq_kv, heads_q, heads_kv, head_size;
  bool causal;
  MaskShape mask;
};

TEST(SageTileCpu, EveryInstructionSetMatchesTheReferenceLoops) {
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const Shape shapes[] = {
      {DType::kBFloat16, 1, 300, 300, 4, 2, 128, false, MaskShape::kNone},
      {DType::kFloat16, 2, 200, 333, 4, 1, 64, false, MaskShape::kKeyPadding},  // Sq != Skv, GQA, padding
      {DType::kBFloat16, 1, 257, 190, 2, 2, 64, true, MaskShape::kNone},        // causal, partial blocks
      {DType::kFloat16, 2, 129, 129, 2, 2, 128, true, MaskShape::kKeyPadding},
  };
  int checked = 0;
  for (const Shape& s : shapes) {
    ParityCase c;
    c.dtype = s.dtype, c.batch = s.batch, c.seq_q = s.seq_q, c.seq_kv = s.seq_kv, c.heads_q = s.heads_q;
    c.heads_kv = s.heads_kv, c.head_size = c.head_size_v = s.head_size, c.causal = s.causal, c.mask = s.mask;
    c.lse = true;
    c.fully_masked_rows = s.mask == MaskShape::kKeyPadding;  // a sequence that keeps no key
    auto data = testing::make_case_data(c, rng);
    AttentionProblem& p = data->problem;
    for (QkMode qk : {QkMode::kInt8, QkMode::k16})
      for (PvMode pv : {PvMode::kFp8, PvMode::kFp16}) {
        const std::string mode =
            std::string(qk == QkMode::kInt8 ? "int8" : "qk16") + (pv == PvMode::kFp8 ? "/fp8" : "/fp16");
        testing::poison(p.out);
        testing::poison(*p.lse);
        ASSERT_TRUE(sage::run_sage_attn_cpu(p, pv, qk, {true, std::nullopt}).ok());
        const std::vector<double> want = values_of(p.out), want_lse = values_of(*p.lse);
        for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
          if (!cpu_isa_available(isa)) continue;
          testing::poison(p.out);
          testing::poison(*p.lse);
          const Status st = sage::run_sage_attn_cpu(p, pv, qk, {false, isa});
          ASSERT_TRUE(st.ok()) << st.message();
          expect_close(values_of(p.out), want, values_of(*p.lse), want_lse,
                       c.name() + " " + mode + " " + std::string(cpu_isa_name(isa)) + " seed " + std::to_string(seed));
          ++checked;
        }
      }
  }
  EXPECT_GE(checked, 16);
}

// Random lists (every fifth row empty) whose odd query tiles are padded to 1-127 valid rows.
BlockSparseLayout random_padded_lists(const ParityCase& c, double density, std::mt19937_64& rng) {
  BlockSparseLayout l = testing::random_sage_lists(c, density, 5, rng);
  for (std::int64_t t = 0; t < l.q_tiles; ++t)
    l.tile_rows.push_back(t % 2 ? static_cast<std::int32_t>(1 + rng() % 127) : 128);
  return l;
}

TEST(SageTileCpu, BlockSparseListsMatchTheReferenceLoops) {
  const std::uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  ParityCase c;
  c.dtype = DType::kBFloat16, c.batch = 1, c.seq_q = c.seq_kv = 128 * 5, c.heads_q = 4, c.heads_kv = 2;
  c.head_size = c.head_size_v = 64, c.lse = true;
  auto data = testing::make_case_data(c, rng);
  AttentionProblem& p = data->problem;
  const BlockSparseLayout lists = random_padded_lists(c, 0.5, rng);
  for (PvMode pv : {PvMode::kFp8, PvMode::kFp16}) {
    testing::poison(p.out);
    testing::poison(*p.lse);
    ASSERT_TRUE(sage::run_sage_block_sparse_cpu(p, lists, pv, {true, std::nullopt}).ok());
    std::vector<double> want = values_of(p.out), want_lse = values_of(*p.lse);
    testing::poison(p.out);
    testing::poison(*p.lse);
    const Status st = sage::run_sage_block_sparse_cpu(p, lists, pv);
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<double> got = values_of(p.out), got_lse = values_of(*p.lse);
    // Rows past a padded tile's valid rows stay unwritten (NaN) in both; compare the others.
    std::size_t unwritten = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << "a padding row was written, element " << i;
        got[i] = want[i] = 0.0, ++unwritten;
      }
    for (std::size_t i = 0; i < got_lse.size(); ++i)
      if (std::isnan(want_lse[i])) {
        EXPECT_TRUE(std::isnan(got_lse[i]));
        got_lse[i] = want_lse[i] = 0.0;
      }
    EXPECT_GT(unwritten, 0u);
    expect_close(got, want, got_lse, want_lse,
                 std::string(pv == PvMode::kFp8 ? "fp8" : "fp16") + " seed " + std::to_string(seed));
  }
}

}  // namespace
}  // namespace diffattn
