// Block-sparse attention on the CPU kernel: the layout's checks, full lists against the dense path
// (bit for bit: the same arithmetic runs), sparse lists against the float64 reference, refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/sparse/block_sparse_layout.h"
#include "kernels/block_sparse_reference.h"
#include "parity/cases.h"
#include "parity/fresh_rng.h"
#include "parity/properties.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;
using testing::ParityCase;

using testing::fresh_rng;

std::vector<unsigned char> bytes_of(const TensorView& t) {
  const auto* begin = static_cast<const unsigned char*>(t.data);
  return {begin, begin + t.span_bytes()};
}

TEST(BlockSparseLayout, TileSizesAreChecked) {
  EXPECT_TRUE(check_block_sparse_tiles(64, 64).ok());
  EXPECT_TRUE(check_block_sparse_tiles(1, kMaxBlockSparseTile).ok());
  for (auto [q, k] : {std::pair{0, 64}, std::pair{64, -1}, std::pair{64, kMaxBlockSparseTile + 1}}) {
    const Status s = check_block_sparse_tiles(q, k);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidInput);
    EXPECT_THAT(s.message(), HasSubstr("choose a tile size"));
  }
}

TEST(BlockSparseLayout, FullLayoutListsEveryTileOnce) {
  const BlockSparseLayout full = full_block_sparse_layout(2, 3, 130, 65, 64, 32);
  EXPECT_EQ(full.q_tiles, 3);
  EXPECT_EQ(full.k_tiles, 3);
  EXPECT_EQ(full.offsets.size(), 2u * 3 * 3 + 1);
  EXPECT_EQ(full.indices.size(), 2u * 3 * 3 * 3);
  EXPECT_DOUBLE_EQ(block_sparse_density(full), 1.0);
  EXPECT_TRUE(check_block_sparse_layout(full, 2, 3, 130, 65).ok());
  EXPECT_EQ(full.row(1, 2, 0), (1 * 3 + 2) * 3);
  EXPECT_EQ(tile_count(0, 64), 0);
  EXPECT_EQ(tile_count(65, 64), 2);
}

TEST(BlockSparseLayout, MalformedLayoutsAreRefusedWithTheFirstWrongEntry) {
  const BlockSparseLayout full = full_block_sparse_layout(1, 2, 100, 100, 64, 64);  // 2 x 2 tiles per head
  struct Bad {
    const char* what;
    void (*apply)(BlockSparseLayout&);
    const char* message;
  };
  const Bad cases[] = {
      {"too few offsets", [](BlockSparseLayout& l) { l.offsets.pop_back(); }, "offsets"},
      {"offsets not ending at the index count", [](BlockSparseLayout& l) { l.offsets.back() -= 1; }, "end at the number"},
      {"decreasing offsets", [](BlockSparseLayout& l) { l.offsets[2] = 1; }, "decrease"},
      {"index past the last tile", [](BlockSparseLayout& l) { l.indices[1] = 2; }, "outside 0..1"},
      {"negative index", [](BlockSparseLayout& l) { l.indices[0] = -1; }, "outside 0..1"},
      {"descending indices", [](BlockSparseLayout& l) { std::swap(l.indices[0], l.indices[1]); }, "ascending"},
      {"a repeated index", [](BlockSparseLayout& l) { l.indices[1] = 0; }, "once"},
      {"shapes of another call", [](BlockSparseLayout& l) { l.heads = 3; }, "build the layout"},
      {"a tile size outside the range", [](BlockSparseLayout& l) { l.k_tile = 0; }, "tile"},
      {"tile rows for some tiles only", [](BlockSparseLayout& l) { l.tile_rows = {64}; }, "one entry per tile"},
      {"an empty tile", [](BlockSparseLayout& l) { l.tile_rows = {64, 0}; }, "outside 1..36"},
      {"a tile longer than its rows", [](BlockSparseLayout& l) { l.tile_rows = {64, 37}; }, "outside 1..36"},
  };
  for (const Bad& bad : cases) {
    BlockSparseLayout layout = full;
    bad.apply(layout);
    const Status s = check_block_sparse_layout(layout, 1, 2, 100, 100);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidInput) << bad.what;
    EXPECT_THAT(s.message(), HasSubstr(bad.message)) << bad.what;
  }
}

// With every tile listed the kernel performs the dense path's operations in the dense order.
TEST(BlockSparseCpu, FullListsEqualTheDensePathBitForBit) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  int runs = 0;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (bool causal : {false, true})
      for (testing::MaskShape mask : {testing::MaskShape::kNone, testing::MaskShape::kKeyPadding}) {
        ParityCase c;
        c.dtype = dtype;
        c.batch = 2, c.seq_q = 200, c.seq_kv = 333, c.heads_q = 4, c.heads_kv = 2, c.head_size = c.head_size_v = 64;
        c.causal = causal;
        c.mask = mask;
        c.lse = true;
        c.layout = testing::Layout::kHeadMajor;
        auto data = testing::make_case_data(c, rng);
        AttentionProblem& p = data->problem;
        for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
          if (!cpu_isa_available(isa)) continue;
          ASSERT_TRUE(run_sdpa_cpu(p, isa).ok());
          const auto dense_out = bytes_of(p.out), dense_lse = bytes_of(*p.lse);
          for (int q_tile : {16, 64, 100}) {
            testing::poison(p.out);
            testing::poison(*p.lse);
            const BlockSparseLayout full = full_block_sparse_layout(c.batch, c.heads_q, c.seq_q, c.seq_kv, q_tile, 64);
            const Status s = run_block_sparse_cpu(p, full, isa);
            ASSERT_TRUE(s.ok()) << s.message();
            EXPECT_TRUE(bytes_of(p.out) == dense_out) << c.name() << " q_tile " << q_tile << " on " << cpu_isa_name(isa);
            EXPECT_TRUE(bytes_of(*p.lse) == dense_lse) << c.name() << " q_tile " << q_tile << " on " << cpu_isa_name(isa);
            ++runs;
          }
        }
      }
  EXPECT_GE(runs, 36);
}

// Random lists (some rows empty) over tiles that are not multiples of any kernel's key panel.
TEST(BlockSparseCpu, SparseListsMatchTheFloat64Reference) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16})
    for (bool causal : {false, true}) {
      ParityCase c;
      c.dtype = dtype;
      c.batch = 2, c.seq_q = 150, c.seq_kv = 150, c.heads_q = 2, c.heads_kv = 1, c.head_size = 64, c.head_size_v = 32;
      c.causal = causal;
      c.mask = testing::MaskShape::kKeyPadding;
      c.lse = true;
      auto data = testing::make_case_data(c, rng);
      AttentionProblem& p = data->problem;
      BlockSparseLayout layout = full_block_sparse_layout(c.batch, c.heads_q, c.seq_q, c.seq_kv, 40, 48);
      layout.indices.clear();
      std::bernoulli_distribution keep(0.5);
      for (std::size_t r = 0; r + 1 < layout.offsets.size(); ++r) {
        layout.offsets[r] = static_cast<std::int32_t>(layout.indices.size());
        if (r % 5 != 3)  // every fifth row keeps nothing
          for (std::int32_t j = 0; j < layout.k_tiles; ++j)
            if (keep(rng)) layout.indices.push_back(j);
      }
      layout.offsets.back() = static_cast<std::int32_t>(layout.indices.size());
      ASSERT_TRUE(check_block_sparse_layout(layout, c.batch, c.heads_q, c.seq_q, c.seq_kv).ok());
      testing::OracleOutput truth = testing::reference_block_sparse(p, layout);
      for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
        if (!cpu_isa_available(isa)) continue;
        testing::poison(p.out);
        testing::poison(*p.lse);
        const Status s = run_block_sparse_cpu(p, layout, isa);
        ASSERT_TRUE(s.ok()) << s.message();
        const testing::Errors err = testing::max_errors(p, truth);
        const double tolerance = dtype == DType::kFloat32 ? 2e-5 : 1e-2;
        EXPECT_LE(err.out, tolerance) << c.name() << " on " << cpu_isa_name(isa) << " (seed " << seed << ")";
        EXPECT_LE(err.lse, 1e-4) << c.name() << " on " << cpu_isa_name(isa) << " (seed " << seed << ")";
      }
    }
}

// Padded tiles (FASTVIDEO_VSA's partial cubes): padding keys are never attended to and padding
// query rows are never written.
TEST(BlockSparseCpu, TileRowsKeepPaddingOutAndLeavePaddingRowsUnwritten) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  ParityCase c;
  c.dtype = DType::kBFloat16;
  c.batch = 2, c.seq_q = c.seq_kv = 4 * 64, c.heads_q = 4, c.heads_kv = 2, c.head_size = c.head_size_v = 64;
  c.lse = true;
  auto data = testing::make_case_data(c, rng);
  AttentionProblem& p = data->problem;
  BlockSparseLayout layout = full_block_sparse_layout(c.batch, c.heads_q, c.seq_q, c.seq_kv, 64, 64);
  layout.tile_rows = {64, 17, 1, 40};
  ASSERT_TRUE(check_block_sparse_layout(layout, c.batch, c.heads_q, c.seq_q, c.seq_kv).ok());
  testing::OracleOutput truth = testing::reference_block_sparse(p, layout);
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!cpu_isa_available(isa)) continue;
    testing::poison(p.out);
    testing::poison(*p.lse);
    ASSERT_TRUE(run_block_sparse_cpu(p, layout, isa).ok());
    double worst = 0.0;
    int unwritten = 0, padding = 0;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < c.seq_q; ++i)
        for (std::int64_t h = 0; h < c.heads_q; ++h) {
          const bool valid = i % 64 < layout.tile_rows[i / 64];
          padding += valid ? 0 : 1;
          const double lse = testing::read_element(*p.lse, testing::element_offset(*p.lse, {b, h, i}));
          for (std::int64_t e = 0; e < c.head_size_v; ++e) {
            const double got = testing::read_element(p.out, testing::element_offset(p.out, {b, i, h, e}));
            if (!valid) {
              unwritten += std::isnan(got) && std::isnan(lse) && e == 0 ? 1 : 0;
              continue;
            }
            const double err = std::fabs(got - truth.at(b, i, h, e));
            worst = std::isnan(err) ? INFINITY : std::max(worst, err);
          }
        }
    EXPECT_LE(worst, 1e-2) << "on " << cpu_isa_name(isa) << " (seed " << seed << ")";
    EXPECT_EQ(unwritten, padding) << "padding rows were written on " << cpu_isa_name(isa);
  }
}

TEST(BlockSparseCpu, LayoutsOfAnotherCallAndPackedBatchesAreRefusedWithNothingWritten) {
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  ParityCase c;
  c.seq_q = c.seq_kv = 100;
  c.lse = true;
  auto data = testing::make_case_data(c, rng);
  const BlockSparseLayout other = full_block_sparse_layout(1, 2, 200, 100, 64, 64);
  const Status wrong = run_block_sparse_cpu(data->problem, other);
  EXPECT_EQ(wrong.code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(testing::check_untouched(data->problem), "");

  ParityCase packed = c;
  packed.varlen = true;
  auto packed_data = testing::make_case_data(packed, rng);
  const Status refused =
      run_block_sparse_cpu(packed_data->problem, full_block_sparse_layout(1, 2, 100, 100, 64, 64));
  EXPECT_EQ(refused.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(refused.message(), HasSubstr("cu_seqlens"));
  EXPECT_EQ(testing::check_untouched(packed_data->problem), "");
}

}  // namespace
}  // namespace diffattn
