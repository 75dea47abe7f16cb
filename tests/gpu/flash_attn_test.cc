// FLASH_ATTN on the GPU against the float64 oracle: DiT-like multi-tile shapes for every head size,
// its tile families, split tails and mask patterns, the Ampere kernel called directly, and bad
// strides. The parity cases, fully masked rows, refusals and graph replay are the parity harness's
// (tests/parity/), as for every backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "backends/factories.h"
#include "kernels/cuda/flash/flash_checks.h"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_hopper.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/sparse/compact_keys.h"
#include "parity/parity_check.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "gpu/device_case.h"
#endif

namespace diffattn {
namespace {

using testing::ParityCase;

#if DIFFATTN_HAVE_CUDA

// FLASH_ATTN has kernels for sm_80..sm_90; elsewhere (or without a GPU) these tests skip.
bool flash_device_present() {
  if (!testing::cuda_device_present()) return false;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return flash::flash_kernel_for_capability(major, minor).has_value();
}

#define SKIP_WITHOUT_FLASH_GPU() \
  if (!flash_device_present()) GTEST_SKIP() << "no CUDA device with FLASH_ATTN kernels (sm_80..sm_90) here"

std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
}

std::unique_ptr<Backend> make_backend() {
  auto backend = create_flash_attn_backend(BackendInit{});
  EXPECT_TRUE(backend.ok()) << backend.status().message();
  return backend.ok() ? std::move(backend).value() : nullptr;
}

// What runs a case: the registered backend (the default), or one kernel called directly.
using Runner = Status (*)(const AttentionProblem&, void*);

// Changes a case's host inputs after they are drawn (before the oracle runs); buffers it adds to
// the case are copied to the GPU with the rest.
using Tweak = std::function<void(testing::CaseData&)>;

// Runs `c` through FLASH_ATTN; returns the failure text (empty: pass).
std::string run_case(const ParityCase& c, std::mt19937_64& rng, void* stream = nullptr, Runner runner = nullptr,
                     const Tweak& tweak = nullptr) {
  auto data = testing::make_case_data(c, rng);
  if (tweak) tweak(*data);
  if (Status valid = validate_problem(data->problem); !valid.ok()) return "invalid case: " + valid.message();
  const bool supported = flash::flash_shape_reasons(data->problem.shape()).empty();
  testing::Expectation expected = testing::expect(data->problem);
  testing::DeviceCase device(*data);
  if (!device.ok()) return "could not copy the case to the GPU";
  Status s;
  if (runner) {
    s = runner(device.problem(), stream);
  } else {
    auto backend = make_backend();
    if (!backend) return "no backend";
    s = backend->forward(device.problem(), stream);
  }
  if (!supported) {
    if (s.code() != ErrorCode::kUnsupported) return "expected kUnsupported, got: " + s.ToString();
    if (!device.copy_back()) return "could not copy the outputs back";
    bool written = false;  // every element of the view, wherever its strides put it
    testing::for_each_offset(data->problem.out, [&](std::int64_t off) {
      written = written || !std::isnan(testing::read_element(data->problem.out, off));
    });
    return written ? "a refused call wrote to out" : "";
  }
  if (!s.ok()) return "forward: " + s.message();
  if (!device.copy_back()) return "could not copy the outputs back";
  return testing::compare(data->problem, expected);
}

// A case of one head size and dtype with `heads` query and key heads.
ParityCase sized_case(std::int64_t d, std::int64_t seq_q, std::int64_t seq_kv, std::int64_t heads, DType dtype) {
  ParityCase c;
  c.dtype = dtype;
  c.head_size = c.head_size_v = d;
  c.seq_q = seq_q;
  c.seq_kv = seq_kv;
  c.heads_q = c.heads_kv = heads;
  return c;
}

// Several query and key tiles, ragged last tiles, causal diagonals, GQA, key padding, packed
// batches and strided layouts for every head size and both half types.
void check_multi_tile_shapes(Runner runner) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const testing::Layout layouts[] = {testing::Layout::kContiguous, testing::Layout::kHeadMajor,
                                     testing::Layout::kPaddedRows};
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (std::int64_t d : {64, 96, 128, 192, 256}) {
      ParityCase c;
      c.dtype = dtype;
      c.head_size = c.head_size_v = d;
      c.seq_q = 200 + 61 * (idx % 3);
      c.seq_kv = idx % 2 ? 333 : 520;
      c.heads_q = 4, c.heads_kv = idx % 2 ? 2 : 4;
      c.causal = idx % 3 == 0;
      c.mask = idx % 4 == 1 ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
      c.layout = layouts[idx % 3];
      c.lse = true;
      c.batch = 1 + idx % 2;
      c.varlen = idx % 5 == 2 && c.mask == testing::MaskShape::kNone;
      EXPECT_EQ(run_case(c, rng, nullptr, runner), "") << c.name() << " (seed " << seed << ")";
      ++idx;
    }
  }
}

TEST(GpuFlashAttn, MultiTileShapesMatchTheOracle) {
  SKIP_WITHOUT_FLASH_GPU();
  check_multi_tile_shapes(nullptr);
}

// Each tile family of the Hopper kernel (128-key staged, 176-key with turns, 192-key wide, and the
// 192-row in-order tiles) and the split of a last partial wave (few tiles, so every tile runs as
// pieces whose partials merge), with key padding that leaves some pieces without any key and
// padded prompts placed first whose padding ends inside a key block.
TEST(GpuFlashAttn, KeyTileFamiliesAndSplitTilesMatchTheOracle) {
  SKIP_WITHOUT_FLASH_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  struct Shape {
    std::int64_t d, seq_q, seq_kv, heads, batch;
    DType dtype;
    bool mask;
    std::int64_t text_keys = 0, prompt_keep = 0;  // a padded prompt placed first (FLUX.1)
  };
  const Shape shapes[] = {
      {128, 300, 4608, 4, 2, DType::kBFloat16, false},  // wide tiles (24 x 192 keys), split
      {128, 200, 8300, 2, 1, DType::kFloat16, false},   // 176-key tiles, split
      {128, 333, 520, 3, 2, DType::kBFloat16, false},   // 128-key tiles
      {128, 300, 4608, 4, 2, DType::kBFloat16, true},   // split, padded prompts
      {128, 333, 520, 3, 2, DType::kFloat16, true},
      // Prompts placed first whose padding ends inside or at a key block, so that a partly
      // padded block is followed by a fully kept one within a tile or split piece.
      {128, 200, 1100, 2, 1, DType::kBFloat16, true, 256, 200},
      {64, 250, 900, 3, 1, DType::kFloat16, true, 260, 150},
      // In-order warpgroups (192 rows) from 8192 rows, unmasked and with a padded prompt placed
      // first (a partly padded key block followed by fully kept ones).
      {128, 8200, 520, 1, 1, DType::kFloat16, false},   // 43 tiles, split
      {128, 8200, 600, 1, 1, DType::kBFloat16, true, 256, 200},
      {64, 500, 1500, 8, 1, DType::kBFloat16, true},    // hd64, split
      {256, 260, 1000, 2, 1, DType::kFloat16, false},   // hd256, split
  };
  for (const Shape& sh : shapes) {
    ParityCase c = sized_case(sh.d, sh.seq_q, sh.seq_kv, sh.heads, sh.dtype);
    c.batch = sh.batch;
    c.mask = sh.mask ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
    c.prefix_padding = sh.mask && sh.text_keys == 0;  // padded prompts: later pieces may see no key
    c.text_keys = sh.text_keys;
    c.prompt_keep = sh.prompt_keep;
    c.fully_masked_rows = sh.batch > 1;    // and one batch with no key at all
    c.lse = true;
    EXPECT_EQ(run_case(c, rng), "") << c.name() << " (seed " << seed << ")";
  }
}

// The key walks of key-padding masks (kernels/sparse/key_walk.h): a prompt placed first walks its
// kept runs (blocks that start inside a key block), scattered keys and causal calls walk the
// aligned blocks with bits, and a batch that keeps no key walks nothing. Small enough for the
// sanitizers.
TEST(GpuFlashAttn, KeyWalksOfRunsAndScatteredKeysMatchTheOracle) {
  SKIP_WITHOUT_FLASH_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128})
      for (int kind = 0; kind < 3; ++kind) {
        ParityCase c = sized_case(d, 150, 1100, 2, dtype);
        c.batch = 3;
        c.mask = testing::MaskShape::kKeyPadding;
        c.lse = true;
        c.fully_masked_rows = kind != 2;  // one batch keeps no key
        if (kind != 1) c.text_keys = 512, c.prompt_keep = 77 + 40 * (d == 64);  // runs (aligned when causal)
        c.causal = kind == 2;
        EXPECT_EQ(run_case(c, rng), "") << c.name() << " (seed " << seed << ")";
      }
}

// The compact walk of non-causal key masks (kernels/sparse/compact_keys.h): whole blocks of the
// kept runs read in place, the rest of every run gathered into a zero-padded copy after them. Every
// head size, GQA, both dtypes, a padded prompt whose image run also ends inside a block (two
// gathered pieces), scattered keys (many runs, most keys gathered), one batch that keeps no key.
TEST(GpuFlashAttn, CompactKeyWalksMatchTheOracle) {
  SKIP_WITHOUT_FLASH_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (std::int64_t d : flash::kHeadSizes)
    for (int kind = 0; kind < 2; ++kind) {
      ParityCase c = sized_case(d, 130, 1500 + 37 * idx, 4, idx % 2 ? DType::kFloat16 : DType::kBFloat16);
      c.heads_kv = 2;
      c.batch = 3;
      c.mask = testing::MaskShape::kKeyPadding;
      c.lse = true;
      c.fully_masked_rows = true;  // one batch keeps no key
      if (kind == 0) c.text_keys = 512, c.prompt_keep = 77 + 3 * idx;
      EXPECT_EQ(run_case(c, rng), "") << c.name() << " (seed " << seed << ")";
      ++idx;
    }
}

// Packed batches of more tiles than SMs, so the Hopper kernel takes them in its packed order
// (kernels/cuda/flash/packed_order.h: sequences ranked by key count, every other round of the grid
// taken backwards) over several rounds: sequences of different query and key lengths, one without
// rows, one without keys (zeros, LSE -inf), GQA, causal and not, both head sizes the video models use.
TEST(GpuFlashAttn, PackedBatchesInSeveralRoundsMatchTheOracle) {
  SKIP_WITHOUT_FLASH_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const std::vector<std::int32_t> q_len = {700, 0, 150, 480, 45, 380, 260};
  const std::vector<std::int32_t> k_len = {600, 160, 0, 480, 45, 800, 260};
  auto offsets = [](const std::vector<std::int32_t>& len) {
    std::vector<std::int32_t> cu(len.size() + 1, 0);
    for (std::size_t i = 0; i < len.size(); ++i) cu[i + 1] = cu[i] + len[i];
    return cu;
  };
  const std::vector<std::int32_t> cu_q = offsets(q_len), cu_k = offsets(k_len);
  const Tweak lengths = [&](testing::CaseData& data) {
    AttentionProblem& p = data.problem;
    for (auto [view, cu] : {std::pair{&p.cu_seqlens_q, &cu_q}, std::pair{&p.cu_seqlens_k, &cu_k}}) {
      const auto n = static_cast<std::int64_t>(cu->size());
      testing::HostBuffer& buf = data.add(DType::kInt32, n);
      std::copy(cu->begin(), cu->end(), static_cast<std::int32_t*>(buf.data()));
      *view = TensorView::Contiguous(buf.data(), DType::kInt32, {n});
    }
    p.max_seqlen_q = *std::max_element(q_len.begin(), q_len.end());
    p.max_seqlen_k = *std::max_element(k_len.begin(), k_len.end());
  };
  int idx = 0;
  for (std::int64_t d : {64, 128})
    for (bool causal : {false, true}) {
      ParityCase c = sized_case(d, cu_q.back(), cu_k.back(), 16, idx % 2 ? DType::kFloat16 : DType::kBFloat16);
      c.heads_kv = 4;
      c.varlen = true;
      c.causal = causal;
      c.lse = true;
      EXPECT_EQ(run_case(c, rng, nullptr, nullptr, lengths), "") << c.name() << " (seed " << seed << ")";
      ++idx;
    }
}

// More tiles than SMs, so whole waves run first and the last partial wave runs as tail runs that
// end one tile and start the next (the plan of SD3's 4429 keys: 35 key blocks a tile, about 0.36
// of a wave left over). A few query rows per head keep the oracle cheap; one tile per head. Plain,
// with padded prompts (blocks of padding skipped inside the runs) and at hd128 (128-key tiles).
TEST(GpuFlashAttn, TailRunsAfterWholeWavesMatchTheOracle) {
  SKIP_WITHOUT_FLASH_GPU();
  int major = 0, sm_count = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0);
  if (major != 9) GTEST_SKIP() << "tail runs belong to the Hopper kernel";
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const std::int64_t keys = 4429, blocks = (keys + 127) / 128;
  const std::int64_t tiles = sm_count + sm_count * 4 / 11;  // 180 on 132 SMs
  const flash::TailSplit plan = flash::plan_tail_split(tiles, sm_count, blocks);
  ASSERT_EQ(plan.split_begin, sm_count) << "the case should leave one whole wave";
  ASSERT_GE(plan.segment_items, 2) << "the case should have runs that cross from one tile into the next";
  struct Shape {
    std::int64_t d;
    DType dtype;
    bool mask;
  };
  const Shape shapes[] = {
      {64, DType::kBFloat16, false},
      {64, DType::kFloat16, true},
      {128, DType::kBFloat16, false},
  };
  for (const Shape& sh : shapes) {
    ParityCase c = sized_case(sh.d, 20, keys, tiles, sh.dtype);  // one batch, a tile per head
    c.mask = sh.mask ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
    c.prefix_padding = sh.mask;
    c.lse = true;
    EXPECT_EQ(run_case(c, rng), "") << c.name() << " (seed " << seed << ")";
  }
}

// Keys in later key blocks whose scores lie far above every earlier one, so that a row's running
// maximum jumps in the middle of its keys: by tens of log2 units (the softmax moves to the new
// maximum and rescales what it has) and by more than the fp32 exponent range (scores taken
// against the old maximum would overflow). Head sizes 64 (row sums in the product), 128 (128-key
// tiles, and the 192-row in-order tiles from 8192 rows) and 256, both half types, causal too.
TEST(GpuFlashAttn, RunningMaximumJumpsInLaterKeyBlocksMatchTheOracle) {
  SKIP_WITHOUT_FLASH_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  struct Shape {
    std::int64_t d, seq_q, seq_kv;
    DType dtype;
    bool causal;
    double factor;  // the chosen keys are multiplied by this
  };
  const Shape shapes[] = {
      {64, 400, 1100, DType::kBFloat16, false, 8.0},   {64, 400, 1100, DType::kFloat16, false, 120.0},
      {128, 400, 1100, DType::kBFloat16, false, 120.0}, {128, 400, 1100, DType::kFloat16, false, 8.0},
      {128, 1100, 1100, DType::kBFloat16, true, 120.0}, {128, 8200, 700, DType::kBFloat16, false, 120.0},
      {128, 8200, 700, DType::kFloat16, false, 8.0},    {256, 300, 1100, DType::kBFloat16, false, 120.0},
  };
  for (const Shape& sh : shapes) {
    ParityCase c = sized_case(sh.d, sh.seq_q, sh.seq_kv, 2, sh.dtype);
    c.causal = sh.causal;
    c.lse = true;
    // Two keys past the first block(s), one of them past the first 512 keys.
    const Tweak grow = [&](testing::CaseData& data) {
      AttentionProblem& p = data.problem;
      for (std::int64_t j : {std::int64_t{300}, sh.seq_kv - 150})
        for (std::int64_t h = 0; h < c.heads_kv; ++h)
          for (std::int64_t x = 0; x < sh.d; ++x) {
            const std::int64_t off = testing::element_offset(p.k, {0, j, h, x});
            testing::write_element(p.k, off, testing::read_element(p.k, off) * sh.factor);
          }
    };
    EXPECT_EQ(run_case(c, rng, nullptr, nullptr, grow), "")
        << c.name() << " keys x" << sh.factor << " (seed " << seed << ")";
  }
}

// The sm_80..sm_89 kernel, called directly so that it is checked on whatever GPU runs the tests
// (on sm_90, CUDA_FORCE_PTX_JIT=1 makes it run from the compute_80 PTX this build embeds).
TEST(GpuFlashAttn, AmpereKernelMatchesTheOracleOrRefuses) {
  SKIP_WITHOUT_FLASH_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const ParityCase& c : testing::parity_cases())
    EXPECT_EQ(run_case(c, rng, nullptr, &flash::run_flash_attn_ampere_cuda), "") << c.name() << " (seed " << seed << ")";
  check_multi_tile_shapes(&flash::run_flash_attn_ampere_cuda);
}

TEST(GpuFlashAttn, UnalignedStridesAreRefusedWithoutWriting) {
  SKIP_WITHOUT_FLASH_GPU();
  std::mt19937_64 rng(fresh_seed());
  ParityCase c;
  c.dtype = DType::kBFloat16;
  c.seq_q = c.seq_kv = 40, c.heads_q = c.heads_kv = 2, c.head_size = c.head_size_v = 64;
  auto data = testing::make_case_data(c, rng);
  testing::DeviceCase device(*data);
  ASSERT_TRUE(device.ok());
  AttentionProblem p = device.problem();
  p.k.strides[1] += 1;  // a sequence stride of 129 elements breaks TMA's 16-byte rule
  p.v.strides[1] += 1;
  p.k.shape[1] = p.v.shape[1] = 39;  // stay inside the allocation
  auto backend = make_backend();
  ASSERT_NE(backend, nullptr);
  const Status s = backend->forward(p, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("16"), std::string::npos) << s.message();  // the 16-byte row rule
  ASSERT_TRUE(device.copy_back());
  EXPECT_TRUE(std::isnan(testing::read_element(data->problem.out, 0)));
}

// The compact walk's builder on the GPU against its CPU oracle (kernels/sparse/compact_keys.h):
// the same block rows and kept count per batch, and gathered copies that hold the oracle's keys'
// K and V rows bit for bit, then zero rows up to the end of the last block. Padded prompts,
// scattered keys, kept prefixes and a batch that keeps no key, on every key tile of the Hopper
// kernel; the copies start as all-ones bits, so rows left unwritten show.
TEST(GpuFlashAttn, CompactKeysBuilderMatchesItsCpuOracle) {
  SKIP_WITHOUT_FLASH_GPU();
  int sm_count = 0;
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0);
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  auto device = [](std::size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    return p;
  };
  for (int block_n : {80, 96, 128, 176})
    for (int kind = 0; kind < 3; ++kind) {
      const int batch = 3, heads_kv = 2, d = 64;
      const int skv = 700 + static_cast<int>(rng() % 1500);
      const std::int64_t row = std::int64_t{heads_kv} * d, blocks = (skv + block_n - 1) / block_n;
      std::vector<std::uint8_t> mask(static_cast<std::size_t>(batch) * skv, 1);
      for (int b = 0; b < batch; ++b) {
        std::uint8_t* m = mask.data() + static_cast<std::size_t>(b) * skv;
        if (b == 1) {  // keeps no key
          std::fill(m, m + skv, 0);
        } else if (kind == 0) {  // a padded prompt first, the image after it
          const int keep = 1 + static_cast<int>(rng() % 300);
          std::fill(m + keep, m + 512, 0);
        } else if (kind == 1) {  // scattered keys in runs of random length
          bool on = true;
          for (int j = 0; j < skv; ++j) {
            if (rng() % 7 == 0) on = !on;
            m[j] = on;
          }
        } else {  // a kept prefix
          std::fill(m + skv / 2 + static_cast<int>(rng() % (skv / 2)), m + skv, 0);
        }
      }
      std::vector<std::uint16_t> k(static_cast<std::size_t>(batch) * skv * row), v(k.size());
      for (auto& x : k) x = static_cast<std::uint16_t>(rng());
      for (auto& x : v) x = static_cast<std::uint16_t>(rng());
      const std::size_t copy_elems = static_cast<std::size_t>(batch) * blocks * block_n * row;
      void* dm = device(mask.size());
      void* dk = device(k.size() * 2);
      void* dv = device(v.size() * 2);
      void* drows = device(static_cast<std::size_t>(batch) * blocks * 4);
      void* dcount = device(batch * 4);
      void* dkg = device(copy_elems * 2);
      void* dvg = device(copy_elems * 2);
      ASSERT_EQ(cudaMemcpy(dm, mask.data(), mask.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(dkg, 0xFF, copy_elems * 2), cudaSuccess);
      ASSERT_EQ(cudaMemset(dvg, 0xFF, copy_elems * 2), cudaSuccess);
      const flash::LaunchStatus s = flash::build_compact_keys_cuda(
          static_cast<const std::uint8_t*>(dm), batch, skv, heads_kv, d, block_n, dk, dv,
          static_cast<std::int32_t*>(drows), static_cast<std::int32_t*>(dcount), dkg, dvg, sm_count, nullptr);
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<std::int32_t> rows(static_cast<std::size_t>(batch * blocks)), count(batch);
      std::vector<std::uint16_t> kg(copy_elems), vg(copy_elems);
      ASSERT_EQ(cudaMemcpy(rows.data(), drows, rows.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(count.data(), dcount, count.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(kg.data(), dkg, copy_elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(vg.data(), dvg, copy_elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (void* p : {dm, dk, dv, drows, dcount, dkg, dvg}) cudaFree(p);
      for (int b = 0; b < batch; ++b) {
        const std::vector<bool> keep(mask.begin() + static_cast<std::ptrdiff_t>(b) * skv,
                                     mask.begin() + static_cast<std::ptrdiff_t>(b + 1) * skv);
        const CompactKeys oracle = compact_keys(keep, block_n);
        const std::string where = "block_n " + std::to_string(block_n) + ", kind " + std::to_string(kind) +
                                  ", batch " + std::to_string(b) + " (seed " + std::to_string(seed) + ")";
        ASSERT_EQ(count[b], oracle.count) << where;
        const auto* brow = rows.data() + b * blocks;
        ASSERT_EQ(std::vector<std::int32_t>(brow, brow + oracle.block_rows.size()), oracle.block_rows) << where;
        const std::int64_t gathered = static_cast<std::int64_t>(oracle.gathered.size());
        const std::int64_t padded = (gathered + block_n - 1) / block_n * block_n;
        for (std::int64_t r = 0; r < padded; ++r) {
          const std::size_t at = static_cast<std::size_t>((b * blocks * block_n + r) * row);
          const std::size_t from =
              r < gathered ? static_cast<std::size_t>((std::int64_t{b} * skv + oracle.gathered[r]) * row) : 0;
          for (std::int64_t e = 0; e < row; ++e) {
            const std::uint16_t want_k = r < gathered ? k[from + e] : 0, want_v = r < gathered ? v[from + e] : 0;
            ASSERT_EQ(kg[at + e], want_k) << where << ", copy row " << r << ", element " << e;
            ASSERT_EQ(vg[at + e], want_v) << where << ", copy row " << r << ", element " << e;
          }
        }
      }
    }
}

#else

TEST(GpuFlashAttn, CpuOnlyBuildReportsUnavailable) {
  auto backend = create_flash_attn_backend(BackendInit{});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(backend.status().message().find("TORCH_SDPA"), std::string::npos);
}

#endif

}  // namespace
}  // namespace diffattn
