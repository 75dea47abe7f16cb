// Dense keep-masks on the Hopper kernel (kernels/cuda/flash/dense_mask.h, run_dense_mask_cuda):
// the lists the device builds equal the CPU oracle's (kernels/sparse/dense_mask_lists.h), and the
// attention under every broadcast form of the mask, with blocks the mask empties, keeps whole and
// cuts, and fully masked rows, matches the float64 oracle within FLASH_ATTN's tolerance.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/sparse/dense_mask_lists.h"
#include "parity/parity_check.h"
#include "parity/properties.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "gpu/device_case.h"
#include "kernels/cuda/flash/dense_mask.h"
#endif

namespace diffattn {
namespace {

#if DIFFATTN_HAVE_CUDA

using testing::fresh_seed;
using testing::hopper_present;
using testing::MaskShape;
using testing::ParityCase;

#define SKIP_WITHOUT_HOPPER() \
  if (!hopper_present()) GTEST_SKIP() << "no sm_90 device here: the dense-mask walk is the Hopper kernel's"

ParityCase masked_case(DType dtype, std::int64_t d, MaskShape mask, std::int64_t sq, std::int64_t skv) {
  ParityCase c;
  c.dtype = dtype;
  c.head_size = c.head_size_v = d;
  c.batch = 2;
  c.seq_q = sq;
  c.seq_kv = skv;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.mask = mask;
  c.block_mask = true;
  c.lse = true;
  return c;
}

TEST(GpuDenseMask, TheDeviceListsEqualTheCpuOracle) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  // 517 keys: rows off 16 bytes, packed a byte per lane; 656: rows on 16 bytes, 16-byte loads. Tiles
  // of 128 x 128 (the listed walk's), and others, so that a key block is not always four words and a
  // query tile's rows split over a different number of CTAs (mask_row_splits).
  struct Tiles {
    int q, k;
  };
  for (Tiles tiles : {Tiles{128, 128}, Tiles{64, 96}, Tiles{192, 64}})
  for (MaskShape shape : {MaskShape::kDense, MaskShape::kDenseBroadcast, MaskShape::kDensePerHead})
    for (std::int64_t skv : {517, 656}) {
      const ParityCase c = masked_case(DType::kBFloat16, 64, shape, 333 + 64 * static_cast<int>(shape), skv);
      auto data = testing::make_case_data(c, rng);
      const TensorView& m = *data->problem.mask;
      const DenseMaskBlockLists want = dense_mask_block_lists(m, tiles.q, tiles.k);
      testing::DeviceCase device(*data);
      ASSERT_TRUE(device.ok());
      const TensorView& dm = *device.problem().mask;
      flash::DenseMaskView view;
      view.data = static_cast<const std::uint8_t*>(dm.data);
      view.batch = dm.size(0), view.heads = dm.size(1);
      view.stride_b = dm.size(0) == 1 ? 0 : dm.stride(0), view.stride_h = dm.size(1) == 1 ? 0 : dm.stride(1);
      view.stride_i = dm.stride(2), view.stride_j = dm.stride(3);
      view.seqlen_q = static_cast<int>(c.seq_q), view.seqlen_k = static_cast<int>(c.seq_kv);
      flash::DenseMaskLists got;
      const flash::DenseMaskStatus built = flash::build_dense_mask_lists(view, tiles.q, tiles.k, nullptr, &got);
      ASSERT_TRUE(built.ok) << built.message;
      const std::string name = c.name() + " tiles " + std::to_string(tiles.q) + "x" + std::to_string(tiles.k);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::size_t rows = want.offsets.size() - 1;
      std::vector<std::int32_t> offsets(rows + 1), indices(want.indices.size());
      std::vector<std::uint8_t> partial(want.partial.size());
      ASSERT_EQ(cudaMemcpy(offsets.data(), got.offsets, offsets.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(offsets, want.offsets) << name << " (seed " << seed << ")";
      if (offsets == want.offsets && !indices.empty()) {
        ASSERT_EQ(cudaMemcpy(indices.data(), got.indices, indices.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(partial.data(), got.partial, partial.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(indices, want.indices) << name;
        EXPECT_EQ(partial, want.partial) << name;
      }
      // The bits of every row: key j of row i is bit j % 32 of word j / 32, zero past Skv.
      const std::int64_t mb = dm.size(0), mh = dm.size(1);
      std::vector<std::uint32_t> bits(static_cast<std::size_t>(mb * mh * c.seq_q * got.words));
      ASSERT_EQ(cudaMemcpy(bits.data(), got.row_bits, bits.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      std::size_t wrong = 0;
      for (std::int64_t b = 0; b < mb; ++b)
        for (std::int64_t h = 0; h < mh; ++h)
          for (std::int64_t i = 0; i < c.seq_q; ++i)
            for (std::int64_t j = 0; j < got.words * 32; ++j) {
              const bool keep = j < c.seq_kv && testing::read_element(m, testing::element_offset(m, {b, h, i, j})) != 0;
              const std::uint32_t word = bits[static_cast<std::size_t>(((b * mh + h) * c.seq_q + i) * got.words + j / 32)];
              wrong += keep != (((word >> (j % 32)) & 1u) != 0);
            }
      EXPECT_EQ(wrong, 0u) << name << ": mask bits that differ from the mask";
      // Some blocks of every kind, so that the comparison means something.
      std::size_t partial_blocks = 0;
      for (auto p : want.partial) partial_blocks += p;
      EXPECT_LT(want.indices.size(), rows * want.k_blocks) << name << ": no block was emptied";
      EXPECT_GT(partial_blocks, 0u) << name;
      cudaFree(got.workspace);
    }
}

// The packing pass's split of a tile's rows: one CTA a tile where tiles fill the GPU, more where
// they are few, never fewer than 8 rows a CTA, and never so many that no tile reaches the bound.
TEST(DenseMaskSplits, FewTilesShareTheirRowsAmongMoreCtas) {
  EXPECT_EQ(flash::mask_row_splits(864, 128), 1);  // FLUX.1, a mask per head: 24 x 36 tiles
  EXPECT_EQ(flash::mask_row_splits(36, 128), 15);  // FLUX.1, one mask for every head
  EXPECT_EQ(flash::mask_row_splits(1, 128), 16);   // 8 rows a CTA at least
  EXPECT_EQ(flash::mask_row_splits(1, 4), 1);
  for (std::int64_t tiles = 1; tiles <= 1200; ++tiles)
    for (int q_tile : {64, 128, 192}) {
      const int s = flash::mask_row_splits(tiles, q_tile);
      ASSERT_GE(s, 1);
      ASSERT_LE(s, q_tile / 8);
      EXPECT_TRUE(tiles * s >= flash::kMaskPackMinCtas || s == q_tile / 8) << tiles << " tiles of " << q_tile;
      if (s > 1) EXPECT_LT(tiles * (s - 1), flash::kMaskPackMinCtas) << tiles << ": fewer splits would do";
    }
}

TEST(GpuDenseMask, EveryBroadcastFormMatchesTheOracle) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (MaskShape shape : {MaskShape::kDense, MaskShape::kDenseBroadcast, MaskShape::kDensePerBatch,
                          MaskShape::kDensePerHead})
    for (std::int64_t d : {64, 128}) {
      const DType dtype = idx % 2 ? DType::kFloat16 : DType::kBFloat16;
      // 704 keys: mask rows on 16 bytes (the 16-byte packing); the others a byte per lane.
      ParityCase c = masked_case(dtype, d, shape, 300 + 97 * idx, idx % 3 ? 704 : 300 + 97 * idx);
      c.fully_masked_rows = idx % 3 == 1;
      ++idx;
      auto data = testing::make_case_data(c, rng);
      testing::Expectation expected = testing::expect(data->problem);
      testing::poison(data->problem.out);
      testing::poison(*data->problem.lse);
      testing::DeviceCase device(*data);
      ASSERT_TRUE(device.ok());
      const Status s = flash::run_dense_mask_cuda(device.problem(), nullptr);
      ASSERT_TRUE(s.ok()) << c.name() << ": " << s.message();
      ASSERT_TRUE(device.copy_back());
      EXPECT_EQ(testing::compare(data->problem, expected), "") << c.name() << " (seed " << seed << ")";
      if (c.fully_masked_rows)
        EXPECT_EQ(testing::check_fully_masked_rows(c, data->problem), "") << c.name() << " (seed " << seed << ")";
    }
}

// Dense masks on both of their tiles (flash_config.h, dense_mask_tile: 128 x 128, and hd128's
// in-order 192 x 128, DIFFATTN_DENSE_MASK_TILE), each with the tail of the last partial wave cut
// along each tile's list and whole (run_flash_attn.cu, listed_tail_split;
// DIFFATTN_LISTED_TAIL_SPLIT=0): every arm gives the oracle's result, empty pieces and fully masked
// rows included, and the arms agree within that tolerance.
TEST(GpuDenseMask, BothTilesWithAndWithoutTailPiecesMatchTheOracle) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  struct Restore {
    ~Restore() {
      unsetenv("DIFFATTN_LISTED_TAIL_SPLIT");
      unsetenv("DIFFATTN_DENSE_MASK_TILE");
    }
  } restore;
  const flash::HopperTile tile = flash::block_sparse_tile(128);
  ParityCase per_head = masked_case(DType::kBFloat16, 128, MaskShape::kDensePerHead, 0, 1024);
  per_head.batch = 1;
  per_head.heads_q = 8;
  per_head.seq_q = (sms / per_head.heads_q + 2) * tile.block_m - 104;  // one round of tiles and some
  per_head.fully_masked_rows = true;
  ParityCase broadcast = masked_case(DType::kFloat16, 128, MaskShape::kDenseBroadcast, 1000, 2048);
  for (const ParityCase& c : {per_head, broadcast}) {
    const std::int64_t tiles = c.batch * c.heads_q * flash::ceil_div(c.seq_q, tile.block_m);
    ASSERT_GT(flash::plan_tail_split(tiles, sms, flash::ceil_div(c.seq_kv, tile.block_n)).segments, 0)
        << c.name() << " must split its tail on " << sms << " SMs";
    auto data = testing::make_case_data(c, rng);
    testing::Expectation expected = testing::expect(data->problem);
    const TensorView& out = data->problem.out;
    const char* arms[4][2] = {{"128", "0"}, {"128", "1"}, {"192", "1"}, {"192", "0"}};  // tile rows, tail split
    std::vector<double> outs[4];
    for (int arm = 0; arm < 4; ++arm) {
      ASSERT_EQ(setenv("DIFFATTN_DENSE_MASK_TILE", arms[arm][0], 1), 0);
      ASSERT_EQ(setenv("DIFFATTN_LISTED_TAIL_SPLIT", arms[arm][1], 1), 0);
      const std::string what = c.name() + " tile " + arms[arm][0] + " split " + arms[arm][1] + " (seed " +
                               std::to_string(seed) + ")";
      testing::poison(out);
      testing::poison(*data->problem.lse);
      testing::DeviceCase device(*data);
      ASSERT_TRUE(device.ok());
      const Status s = flash::run_dense_mask_cuda(device.problem(), nullptr);
      ASSERT_TRUE(s.ok()) << what << ": " << s.message();
      ASSERT_TRUE(device.copy_back());
      EXPECT_EQ(testing::compare(data->problem, expected), "") << what;
      if (c.fully_masked_rows) EXPECT_EQ(testing::check_fully_masked_rows(c, data->problem), "") << what;
      outs[arm] = testing::output_values(out);
      if (arm > 0) EXPECT_LE(testing::max_abs_diff(outs[0], outs[arm]), expected.out_tolerance) << what;
    }
  }
}

TEST(GpuDenseMask, RefusalsNameTheFixAndWriteNothing) {
  SKIP_WITHOUT_HOPPER();
  std::mt19937_64 rng(fresh_seed());
  ParityCase c = masked_case(DType::kBFloat16, 64, MaskShape::kDense, 200, 200);
  c.causal = true;
  auto data = testing::make_case_data(c, rng);
  testing::poison(data->problem.out);
  testing::poison(*data->problem.lse);
  testing::DeviceCase device(*data);
  ASSERT_TRUE(device.ok());
  const Status s = flash::run_dense_mask_cuda(device.problem(), nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("fold the causal cut into the mask"), std::string::npos) << s.message();
  ASSERT_TRUE(device.copy_back());
  EXPECT_EQ(testing::check_untouched(data->problem), "");
}

#else

TEST(GpuDenseMask, TheDeviceListsEqualTheCpuOracle) { GTEST_SKIP() << "this build has no CUDA support"; }

#endif

}  // namespace
}  // namespace diffattn
