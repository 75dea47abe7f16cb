// The CPU oracle of the dense-mask key-block lists: on masks whose blocks are known by
// construction (empty, whole, partial), with broadcast dimensions and ragged last tiles.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/sparse/dense_mask_lists.h"

namespace diffattn {
namespace {

struct Mask {
  std::vector<std::uint8_t> bytes;
  TensorView view;
};

// A [b, h, sq, skv] mask whose (tile t, block nb) holds kind[(bh * q_tiles + t) * k_blocks + nb]:
// 0 drops every key, 2 keeps every key, 1 keeps a random proper subset (at least one key kept and
// one dropped among the tile's rows).
Mask make_mask(std::int64_t b, std::int64_t h, std::int64_t sq, std::int64_t skv, int qt, int kt,
               const std::vector<int>& kind, std::mt19937_64& rng) {
  Mask m;
  m.bytes.assign(static_cast<std::size_t>(b * h * sq * skv), 0);
  const std::int64_t q_tiles = (sq + qt - 1) / qt, k_blocks = (skv + kt - 1) / kt;
  for (std::int64_t bh = 0; bh < b * h; ++bh)
    for (std::int64_t t = 0; t < q_tiles; ++t)
      for (std::int64_t nb = 0; nb < k_blocks; ++nb) {
        const int k = kind[static_cast<std::size_t>((bh * q_tiles + t) * k_blocks + nb)];
        const std::int64_t i0 = t * qt, i1 = std::min(sq, i0 + qt), j0 = nb * kt, j1 = std::min(skv, j0 + kt);
        for (std::int64_t i = i0; i < i1; ++i)
          for (std::int64_t j = j0; j < j1; ++j)
            m.bytes[static_cast<std::size_t>((bh * sq + i) * skv + j)] = k == 2 ? 1 : k == 1 ? (rng() & 1) : 0;
        if (k == 1) {  // make sure the block is partial
          m.bytes[static_cast<std::size_t>((bh * sq + i0) * skv + j0)] = 1;
          m.bytes[static_cast<std::size_t>((bh * sq + i1 - 1) * skv + j1 - 1)] = 0;
        }
      }
  m.view = TensorView::Contiguous(m.bytes.data(), DType::kBool, {b, h, sq, skv}, Device{});
  return m;
}

TEST(DenseMaskLists, ListEveryBlockThatKeepsAKeyAndMarkThePartialOnes) {
  std::mt19937_64 rng(7);
  const std::int64_t b = 2, h = 3, sq = 300, skv = 270;  // ragged last tiles both ways
  const int qt = 128, kt = 128;
  const std::int64_t q_tiles = 3, k_blocks = 3;
  std::vector<int> kind(static_cast<std::size_t>(b * h * q_tiles * k_blocks));
  for (auto& k : kind) k = static_cast<int>(rng() % 3);
  kind[0] = kind[1] = kind[2] = 0;  // the first tile of (0, 0) keeps nothing
  const Mask m = make_mask(b, h, sq, skv, qt, kt, kind, rng);
  const DenseMaskBlockLists l = dense_mask_block_lists(m.view, qt, kt);
  EXPECT_EQ(l.batch, b);
  EXPECT_EQ(l.heads, h);
  EXPECT_EQ(l.q_tiles, q_tiles);
  EXPECT_EQ(l.k_blocks, k_blocks);
  ASSERT_EQ(l.offsets.size(), static_cast<std::size_t>(b * h * q_tiles + 1));
  EXPECT_EQ(l.offsets[1], 0);  // the empty tile
  for (std::int64_t r = 0; r < b * h * q_tiles; ++r) {
    std::vector<std::int32_t> want_idx;
    std::vector<std::uint8_t> want_partial;
    for (std::int64_t nb = 0; nb < k_blocks; ++nb) {
      const int k = kind[static_cast<std::size_t>(r * k_blocks + nb)];
      if (k == 0) continue;
      want_idx.push_back(static_cast<std::int32_t>(nb));
      want_partial.push_back(k == 1);
    }
    const std::vector<std::int32_t> got_idx(l.indices.begin() + l.offsets[r], l.indices.begin() + l.offsets[r + 1]);
    const std::vector<std::uint8_t> got_partial(l.partial.begin() + l.offsets[r], l.partial.begin() + l.offsets[r + 1]);
    EXPECT_EQ(got_idx, want_idx) << "list " << r;
    EXPECT_EQ(got_partial, want_partial) << "list " << r;
  }
}

TEST(DenseMaskLists, BroadcastDimensionsGiveOneListPerTileOfTheMask) {
  std::mt19937_64 rng(11);
  std::vector<int> kind = {2, 0, 1, 1, 2, 0};  // 2 query tiles x 3 key blocks, one (b, h)
  const Mask m = make_mask(1, 1, 200, 300, 128, 128, kind, rng);
  const DenseMaskBlockLists l = dense_mask_block_lists(m.view, 128, 128);
  EXPECT_EQ(l.batch, 1);
  EXPECT_EQ(l.heads, 1);
  EXPECT_EQ(l.offsets, (std::vector<std::int32_t>{0, 2, 4}));
  EXPECT_EQ(l.indices, (std::vector<std::int32_t>{0, 2, 0, 1}));
  EXPECT_EQ(l.partial, (std::vector<std::uint8_t>{0, 1, 1, 0}));
}

}  // namespace
}  // namespace diffattn
