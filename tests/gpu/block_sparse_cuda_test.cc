// Block-sparse attention on the Hopper kernel and on the mma.sync walk (the Ampere/Ada kernel, run
// from its compute_80 code on newer GPUs) against the block-sparse CPU kernel on the same inputs and
// the same key-tile lists: both tilings (the large tile of each head size and the 64 x 64 tiles),
// bf16 and fp16, hd64 and hd128, GQA, Sq != Skv, empty lists, padded tiles (tile_rows), random and
// every-tile layouts; and the refusals, which leave out untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/sparse/block_sparse_layout.h"
#include "kernels/sparse/segmented_key_blocks.h"
#include "parity/cases.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "gpu/device_case.h"
#endif

namespace diffattn {
namespace {

#if DIFFATTN_HAVE_CUDA

using flash::BlockSparseKernel;
using testing::fresh_seed;
using testing::hopper_present;
using testing::sm80_or_newer_present;

#define SKIP_WITHOUT_HOPPER() \
  if (!hopper_present()) GTEST_SKIP() << "no sm_90 device here: the block-sparse kernel is Hopper's"
#define SKIP_WITHOUT_SM80() \
  if (!sm80_or_newer_present()) GTEST_SKIP() << "no sm_80 or newer device here for the mma.sync walk"


// Each (batch, head, query tile) lists round(density x key tiles) random distinct key tiles;
// `empty_every` > 0 leaves every such row's list empty.
BlockSparseLayout random_layout(const testing::ParityCase& c, int q_tile, int k_tile, double density, int empty_every,
                                std::mt19937_64& rng) {
  BlockSparseLayout l;
  l.q_tile = q_tile;
  l.k_tile = k_tile;
  l.batch = c.batch;
  l.heads = c.heads_q;
  l.q_tiles = tile_count(c.seq_q, q_tile);
  l.k_tiles = tile_count(c.seq_kv, k_tile);
  const auto keep = std::max<std::int64_t>(1, std::llround(density * static_cast<double>(l.k_tiles)));
  std::vector<std::int32_t> all(static_cast<std::size_t>(l.k_tiles));
  l.offsets.push_back(0);
  for (std::int64_t r = 0; r < l.batch * l.heads * l.q_tiles; ++r) {
    if (empty_every == 0 || r % empty_every != empty_every - 1) {
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int32_t>(i);
      std::shuffle(all.begin(), all.end(), rng);
      std::sort(all.begin(), all.begin() + keep);
      l.indices.insert(l.indices.end(), all.begin(), all.begin() + keep);
    }
    l.offsets.push_back(static_cast<std::int32_t>(l.indices.size()));
  }
  return l;
}

testing::ParityCase make_case(DType dtype, std::int64_t d, std::int64_t batch, std::int64_t sq, std::int64_t skv,
                              std::int64_t hq, std::int64_t hkv) {
  testing::ParityCase c;
  c.dtype = dtype;
  c.head_size = c.head_size_v = d;
  c.batch = batch;
  c.seq_q = sq;
  c.seq_kv = skv;
  c.heads_q = hq;
  c.heads_kv = hkv;
  c.lse = true;
  return c;
}

// A device copy of a host vector, freed with the object.
struct DeviceInts {
  std::int32_t* ptr = nullptr;
  explicit DeviceInts(const std::vector<std::int32_t>& host, std::size_t size = 0) {
    const std::size_t n = std::max(host.size(), size);
    if (cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(std::int32_t)) != cudaSuccess) ptr = nullptr;
    if (ptr != nullptr && !host.empty())
      (void)cudaMemcpy(ptr, host.data(), host.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice);
  }
  ~DeviceInts() { (void)cudaFree(ptr); }
  DeviceInts(const DeviceInts&) = delete;
  DeviceInts& operator=(const DeviceInts&) = delete;
};

// The lists of `layout` (64 x 64, with tile rows) segmented on the device, checked word for word
// against the host's functions (segment_query_tiles, query_block_union, segment_entries), then run;
// returns the failure text.
std::string run_segmented(const AttentionProblem& problem, const BlockSparseLayout& layout) {
  const std::int64_t groups = layout.batch * layout.heads;
  const int tiles = static_cast<int>(layout.q_tiles);
  int longest = 0;
  for (std::size_t r = 0; r + 1 < layout.offsets.size(); ++r)
    longest = std::max(longest, layout.offsets[r + 1] - layout.offsets[r]);
  SegmentedLists seg = plan_segmented_lists(layout.tile_rows, groups, longest);
  DeviceInts offsets(layout.offsets), indices(layout.indices), tile_rows(layout.tile_rows);
  DeviceInts query_blocks({}, 4 * static_cast<std::size_t>(seg.query_ctas));
  DeviceInts first({}, static_cast<std::size_t>(groups * seg.query_ctas));
  DeviceInts counts({}, static_cast<std::size_t>(groups * seg.query_ctas));
  DeviceInts blocks({}, static_cast<std::size_t>(4 * seg.block_capacity()));
  if (offsets.ptr == nullptr || indices.ptr == nullptr || tile_rows.ptr == nullptr || query_blocks.ptr == nullptr ||
      first.ptr == nullptr || counts.ptr == nullptr || blocks.ptr == nullptr)
    return "could not allocate the lists on the GPU";
  seg.query_blocks = query_blocks.ptr;
  seg.block_first = first.ptr;
  seg.block_counts = counts.ptr;
  seg.blocks = blocks.ptr;
  flash::DeviceBlockSparseLists lists{64, 64, offsets.ptr, indices.ptr, tile_rows.ptr};
  if (Status s = flash::build_segmented_lists_cuda(lists, seg, nullptr); !s.ok()) return "segmenting: " + s.message();
  const auto back = [](const DeviceInts& d, std::size_t n) {
    std::vector<std::int32_t> h(n);
    if (n > 0 && cudaMemcpy(h.data(), d.ptr, n * sizeof(std::int32_t), cudaMemcpyDeviceToHost) != cudaSuccess) h.clear();
    return h;
  };
  const auto got_query = back(query_blocks, 4 * static_cast<std::size_t>(seg.query_ctas));
  const auto got_first = back(first, static_cast<std::size_t>(groups * seg.query_ctas));
  const auto got_counts = back(counts, static_cast<std::size_t>(groups * seg.query_ctas));
  const auto got_blocks = back(blocks, static_cast<std::size_t>(4 * seg.block_capacity()));
  if (got_query.empty() || got_counts.empty() || got_blocks.empty()) return "could not copy the blocks back";
  const std::vector<SegmentedBlock> ctas = segment_query_tiles(layout.tile_rows.data(), tiles);
  for (int x = 0; x < seg.query_ctas; ++x)
    for (int w = 0; w < 4; ++w)
      if (got_query[4 * static_cast<std::size_t>(x) + static_cast<std::size_t>(w)] != ctas[static_cast<std::size_t>(x)].w[w])
        return "query CTA " + std::to_string(x) + " differs from the host's rule";
  for (std::int64_t g = 0; g < groups; ++g) {
    const auto list_of = [&](std::int32_t t) {
      const std::size_t r = static_cast<std::size_t>(g * tiles + t);
      return std::pair<const std::int32_t*, int>(layout.indices.data() + layout.offsets[r],
                                                 layout.offsets[r + 1] - layout.offsets[r]);
    };
    for (int x = 0; x < seg.query_ctas; ++x) {
      const auto entries = query_block_union(ctas[static_cast<std::size_t>(x)], list_of);
      const auto want = segment_entries(entries.data(), static_cast<int>(entries.size()), layout.tile_rows.data());
      const std::size_t i = static_cast<std::size_t>(g * seg.query_ctas + x);
      if (got_counts[i] != static_cast<std::int32_t>(want.size()))
        return "group " + std::to_string(g) + " CTA " + std::to_string(x) + ": " + std::to_string(got_counts[i]) +
               " key blocks, the host's rule " + std::to_string(want.size());
      for (std::size_t k = 0; k < want.size(); ++k)
        for (int w = 0; w < 4; ++w)
          if (got_blocks[4 * (static_cast<std::size_t>(got_first[i]) + k) + static_cast<std::size_t>(w)] != want[k].w[w])
            return "group " + std::to_string(g) + " CTA " + std::to_string(x) + " key block " + std::to_string(k) +
                   " differs from the host's rule";
    }
  }
  lists.segmented = &seg;
  if (Status s = flash::run_block_sparse_cuda(problem, lists, nullptr); !s.ok()) return "gpu: " + s.message();
  return cudaDeviceSynchronize() == cudaSuccess ? "" : "the walk failed";
}

// Runs `layout` on the CPU and the GPU over the same inputs; returns the failure text (empty: pass).
// Rows past a padded tile's valid rows are not compared (the CPU leaves them, the GPU fills them).
// `segmented`: the GPU walks the lists as segmented key blocks (64 x 64 lists with tile rows).
std::string check_layout(const testing::ParityCase& c, const BlockSparseLayout& layout, std::mt19937_64& rng,
                         BlockSparseKernel kernel = BlockSparseKernel::kForDevice, bool segmented = false) {
  auto data = testing::make_case_data(c, rng);
  AttentionProblem& hp = data->problem;
  // The CPU oracle first, into copies of out and lse.
  if (Status s = run_block_sparse_cpu(hp, layout); !s.ok()) return "cpu: " + s.message();
  const std::int64_t dv = c.head_size_v;
  std::vector<double> want_out, want_lse;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.seq_q; ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        for (std::int64_t e = 0; e < dv; ++e)
          want_out.push_back(testing::read_element(hp.out, testing::element_offset(hp.out, {b, i, h, e})));
        want_lse.push_back(testing::read_element(*hp.lse, testing::element_offset(*hp.lse, {b, h, i})));
      }
  testing::poison(hp.out);
  testing::poison(*hp.lse);
  testing::DeviceCase device(*data);
  if (!device.ok()) return "could not copy the case to the GPU";
  if (segmented) {
    if (const std::string failed = run_segmented(device.problem(), layout); !failed.empty()) return failed;
  } else if (Status s = flash::run_block_sparse_cuda(device.problem(), layout, nullptr, kernel); !s.ok()) {
    return "gpu: " + s.message();
  }
  if (!device.copy_back()) return "could not copy the outputs back";
  const double tol = c.dtype == DType::kBFloat16 ? 1.6e-2 : 3e-3;
  std::size_t at = 0, row = 0;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.seq_q; ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h, ++row) {
        const std::int64_t t = i / layout.q_tile;
        const bool padding = !layout.tile_rows.empty() && i - t * layout.q_tile >= layout.tile_rows[t];
        const double wl = want_lse[row];
        const double gl = testing::read_element(*hp.lse, testing::element_offset(*hp.lse, {b, h, i}));
        for (std::int64_t e = 0; e < dv; ++e, ++at) {
          if (padding) continue;
          const double got = testing::read_element(hp.out, testing::element_offset(hp.out, {b, i, h, e}));
          if (!(std::fabs(got - want_out[at]) <= tol * (1.0 + std::fabs(want_out[at]))))
            return "out[" + std::to_string(b) + "," + std::to_string(i) + "," + std::to_string(h) + "," +
                   std::to_string(e) + "] = " + std::to_string(got) + ", cpu " + std::to_string(want_out[at]);
        }
        if (padding) continue;
        const bool both_empty = std::isinf(wl) && wl < 0 && std::isinf(gl) && gl < 0;
        if (!both_empty && !(std::fabs(gl - wl) <= 2e-3 * (1.0 + std::fabs(wl))))
          return "lse[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) +
                 "] = " + std::to_string(gl) + ", cpu " + std::to_string(wl);
      }
  return "";
}

void check_large_tiles(BlockSparseKernel kernel) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128}) {
      const flash::HopperTile tile = flash::block_sparse_tile(static_cast<int>(d));
      const std::int64_t sq = 700 + 37 * idx;
      const auto c = make_case(dtype, d, 1 + idx % 2, sq, idx % 2 ? sq : 1100, 4, idx % 2 ? 2 : 4);
      for (double density : {1.0, 0.4})
        EXPECT_EQ(check_layout(c, random_layout(c, tile.block_m, tile.block_n, density, idx % 2 ? 5 : 0, rng), rng,
                               kernel),
                  "")
            << c.name() << " density " << density << " (seed " << seed << ")";
      ++idx;
    }
}

void check_small_tiles(BlockSparseKernel kernel) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128}) {
      // An odd count of 64-row query tiles leaves the last CTA's second group without a tile.
      const auto c = make_case(dtype, d, 2, 64 * 9 + 17 * idx, idx % 2 ? 64 * 9 + 17 * idx : 1000, 3, idx % 2 ? 1 : 3);
      for (double density : {1.0, 0.3})
        EXPECT_EQ(check_layout(c, random_layout(c, 64, 64, density, idx % 2 ? 0 : 4, rng), rng, kernel), "")
            << c.name() << " density " << density << " (seed " << seed << ")";
      ++idx;
    }
}

void check_padded_tiles(BlockSparseKernel kernel) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (std::int64_t d : {64, 128})
    for (int tile : {64, 128}) {
      const auto c = make_case(d == 64 ? DType::kBFloat16 : DType::kFloat16, d, 1, tile * 7, tile * 7, 2, 2);
      BlockSparseLayout layout = random_layout(c, tile, tile, 0.6, 0, rng);
      std::uniform_int_distribution<std::int32_t> rows(1, tile);
      for (std::int64_t t = 0; t < layout.q_tiles; ++t) layout.tile_rows.push_back(t % 3 == 1 ? rows(rng) : tile);
      EXPECT_EQ(check_layout(c, layout, rng, kernel), "") << c.name() << " tile " << tile << " (seed " << seed << ")";
    }
}

// Segmented lists on Hopper's walk: tiles of every valid count that packs (1-48 rows) and whole
// ones, as queries (several tiles' segments in one CTA) and as keys, lists from none to every tile,
// both head sizes and dtypes, GQA.
TEST(GpuBlockSparse, SegmentedListsMatchTheCpuKernel) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128}) {
      const std::int64_t tiles = 11 + idx;
      const auto c = make_case(dtype, d, 2, 64 * tiles, 64 * tiles, 4, idx % 2 ? 2 : 4);
      for (double density : {1.0, 0.5, 0.05}) {
        BlockSparseLayout layout = random_layout(c, 64, 64, density, idx % 2 ? 0 : 6, rng);
        std::uniform_int_distribution<std::int32_t> rows(1, 48);
        for (std::int64_t t = 0; t < layout.q_tiles; ++t) layout.tile_rows.push_back(t % 4 == 0 ? 64 : rows(rng));
        EXPECT_EQ(check_layout(c, layout, rng, BlockSparseKernel::kForDevice, /*segmented=*/true), "")
            << c.name() << " density " << density << " (seed " << seed << ")";
      }
      ++idx;
    }
}

TEST(GpuBlockSparse, LargeTilesMatchTheCpuKernel) {
  SKIP_WITHOUT_HOPPER();
  check_large_tiles(BlockSparseKernel::kForDevice);
}

TEST(GpuBlockSparse, SmallTilesWithTheirOwnListsPerGroupMatchTheCpuKernel) {
  SKIP_WITHOUT_HOPPER();
  check_small_tiles(BlockSparseKernel::kForDevice);
}

TEST(GpuBlockSparse, PaddedTilesNeverAttendToTheirPaddingKeys) {
  SKIP_WITHOUT_HOPPER();
  check_padded_tiles(BlockSparseKernel::kForDevice);
}

// The mma.sync walk on the same lists: the kernel Ampere and Ada run.
TEST(GpuBlockSparse, AmpereWalkLargeTilesMatchTheCpuKernel) {
  SKIP_WITHOUT_SM80();
  check_large_tiles(BlockSparseKernel::kAmpere);
}

TEST(GpuBlockSparse, AmpereWalkSmallTilesMatchTheCpuKernel) {
  SKIP_WITHOUT_SM80();
  check_small_tiles(BlockSparseKernel::kAmpere);
}

TEST(GpuBlockSparse, AmpereWalkPaddedTilesNeverAttendToTheirPaddingKeys) {
  SKIP_WITHOUT_SM80();
  check_padded_tiles(BlockSparseKernel::kAmpere);
}

// A refused call leaves out as it was (NaN poison).
std::string expect_refused(const testing::ParityCase& c, const BlockSparseLayout& layout, ErrorCode code,
                           std::mt19937_64& rng, BlockSparseKernel kernel = BlockSparseKernel::kForDevice) {
  auto data = testing::make_case_data(c, rng);
  testing::DeviceCase device(*data);
  if (!device.ok()) return "could not copy the case to the GPU";
  const Status s = flash::run_block_sparse_cuda(device.problem(), layout, nullptr, kernel);
  if (s.code() != code) return "expected code " + std::to_string(static_cast<int>(code)) + ", got: " + s.ToString();
  if (!device.copy_back()) return "could not copy the outputs back";
  bool written = false;
  testing::for_each_offset(data->problem.out, [&](std::int64_t off) {
    written = written || !std::isnan(testing::read_element(data->problem.out, off));
  });
  return written ? "a refused call wrote to out" : "";
}

void check_refusals(BlockSparseKernel kernel, std::mt19937_64& rng) {
  const auto c = make_case(DType::kBFloat16, 128, 1, 300, 300, 2, 2);
  // Tiles the kernel does not take.
  EXPECT_EQ(expect_refused(c, random_layout(c, 96, 96, 1.0, 0, rng), ErrorCode::kInvalidInput, rng, kernel), "");
  // Padded tiles over cross-attention (tile rows describe self-attention's tiles).
  const auto cross = make_case(DType::kBFloat16, 128, 1, 300, 500, 2, 2);
  BlockSparseLayout padded = random_layout(cross, 128, 128, 1.0, 0, rng);
  padded.tile_rows.assign(static_cast<std::size_t>(padded.q_tiles), 100);
  EXPECT_EQ(expect_refused(cross, padded, ErrorCode::kUnsupported, rng, kernel), "");
  // A layout that does not describe the problem (one key tile too many).
  BlockSparseLayout wrong = random_layout(c, 64, 64, 1.0, 0, rng);
  wrong.indices.back() = static_cast<std::int32_t>(wrong.k_tiles);
  EXPECT_EQ(expect_refused(c, wrong, ErrorCode::kInvalidInput, rng, kernel), "");
  // Causal problems and other head sizes.
  auto causal = c;
  causal.causal = true;
  EXPECT_EQ(
      expect_refused(causal, random_layout(causal, 128, 128, 1.0, 0, rng), ErrorCode::kUnsupported, rng, kernel), "");
  const auto hd96 = make_case(DType::kBFloat16, 96, 1, 300, 300, 2, 2);
  EXPECT_EQ(expect_refused(hd96, random_layout(hd96, 64, 64, 1.0, 0, rng), ErrorCode::kUnsupported, rng, kernel), "");
}

TEST(GpuBlockSparse, RefusalsNameTheFixAndWriteNothing) {
  SKIP_WITHOUT_HOPPER();
  std::mt19937_64 rng(fresh_seed());
  check_refusals(BlockSparseKernel::kForDevice, rng);
}

TEST(GpuBlockSparse, AmpereWalkRefusalsNameTheFixAndWriteNothing) {
  SKIP_WITHOUT_SM80();
  std::mt19937_64 rng(fresh_seed());
  check_refusals(BlockSparseKernel::kAmpere, rng);
}

#else

TEST(GpuBlockSparse, CpuOnlyBuildReportsUnavailable) {
  std::mt19937_64 rng(1);
  testing::ParityCase c;
  c.dtype = DType::kBFloat16;
  auto data = testing::make_case_data(c, rng);
  BlockSparseLayout layout = full_block_sparse_layout(1, c.heads_q, c.seq_q, c.seq_kv, 64, 64);
  EXPECT_EQ(flash::run_block_sparse_cuda(data->problem, layout, nullptr).code(), ErrorCode::kUnavailable);
}

#endif

}  // namespace
}  // namespace diffattn
