// CUDNN_ATTN on the GPU against the float64 oracle: every mask kind (key padding as lengths to the
// last kept key plus a bias, the additive bias of dense masks, rows a mask empties) and packed
// batches; that masked calls do not wait for their stream; and its refusals: head sizes, dtypes,
// kv length <= 1 (explicit: error; automatic: TORCH_SDPA's kernel).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <thread>

#include "backends/factories.h"
#include "parity/parity_check.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cudnn_attn/cudnn_attn_checks.h"
#include "gpu/device_case.h"
#endif

namespace diffattn {
namespace {

using testing::ParityCase;

#if DIFFATTN_HAVE_CUDA

#define SKIP_WITHOUT_GPU() \
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device on this machine"

std::unique_ptr<Backend> make_backend(bool explicit_choice) {
  BackendInit init;
  init.explicit_choice = explicit_choice;
  auto created = create_cudnn_attn_backend(init);
  return created.ok() ? std::move(created).value() : nullptr;
}

// Key padding as padding usually comes: keep a random non-empty prefix of each batch's keys.
void make_mask_a_prefix(testing::CaseData& data, std::mt19937_64& rng) {
  if (!data.problem.mask) return;
  const TensorView& m = *data.problem.mask;
  const std::int64_t skv = m.size(m.ndim - 1);
  for (std::int64_t b = 0; b < m.size(0); ++b) {
    const std::int64_t kept = std::uniform_int_distribution<std::int64_t>(1, skv)(rng);
    for (std::int64_t j = 0; j < skv; ++j) testing::write_element(m, b * m.stride(0) + j * m.stride(m.ndim - 1), j < kept);
  }
}

struct Outcome {
  Status status;
  std::string mismatch;
};

Outcome run_case(Backend& backend, testing::CaseData& data) {
  testing::Expectation expected = testing::expect(data.problem);
  testing::DeviceCase device(data);
  if (!device.ok()) return {Internal("could not copy the case to the GPU"), ""};
  Outcome o{backend.forward(device.problem(), nullptr), ""};
  if (!o.status.ok()) return o;
  if (!device.copy_back()) return {Internal("could not copy the outputs back"), ""};
  o.mismatch = testing::compare(data.problem, expected);
  return o;
}

std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
}

TEST(GpuCudnnAttn, MatchesTheOracleOnEverySupportedParityCase) {
  SKIP_WITHOUT_GPU();
  auto backend = make_backend(true);
  ASSERT_NE(backend, nullptr);
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int ran = 0;
  for (ParityCase c : testing::parity_cases()) {
    if (!cudnn_attn::problem_reasons([&] {
           auto s = testing::case_shape(c);
           s.device = DeviceKind::kCuda;
           return s;
         }()).empty())
      continue;
    auto data = testing::make_case_data(c, rng);
    const Outcome o = run_case(*backend, *data);
    // cuDNN's own support check may still refuse a shape (e.g. some Dv != D); that is reported.
    if (o.status.code() == ErrorCode::kUnsupported && o.status.message().find("cuDNN") != std::string::npos) {
      std::printf("[  NOTE    ] %s: %s\n", c.name().c_str(), o.status.message().c_str());
      continue;
    }
    ASSERT_TRUE(o.status.ok()) << c.name() << ": " << o.status.message();
    EXPECT_EQ(o.mismatch, "") << c.name() << " (seed " << seed << ")";
    ++ran;
  }
  EXPECT_GT(ran, 10);
}

TEST(GpuCudnnAttn, MatchesTheOracleOnDiTShapes) {
  SKIP_WITHOUT_GPU();
  auto backend = make_backend(true);
  ASSERT_NE(backend, nullptr);
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (std::int64_t d : {64, 72, 128, 256}) {
      ParityCase c;
      c.dtype = dtype;
      c.head_size = c.head_size_v = d;
      c.batch = 2;
      c.seq_q = 190, c.seq_kv = idx % 2 ? 77 : 190;
      c.heads_q = 4, c.heads_kv = idx % 2 ? 1 : 4;
      c.causal = idx % 3 == 0;
      c.mask = idx % 2 == 0 ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
      c.layout = idx % 2 ? testing::Layout::kHeadMajor : testing::Layout::kContiguous;
      c.lse = true;
      auto data = testing::make_case_data(c, rng);
      make_mask_a_prefix(*data, rng);
      const Outcome o = run_case(*backend, *data);
      ASSERT_TRUE(o.status.ok()) << c.name() << ": " << o.status.message();
      EXPECT_EQ(o.mismatch, "") << c.name() << " (seed " << seed << ")";
      ++idx;
    }
  }
}

TEST(GpuCudnnAttn, ExplicitKvLengthOneIsAnErrorAndAutomaticRunsTorchSdpa) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(fresh_seed());
  ParityCase c;
  c.dtype = DType::kBFloat16;
  c.seq_q = 33, c.seq_kv = 1, c.head_size = c.head_size_v = 64, c.lse = true;
  auto data = testing::make_case_data(c, rng);
  const Outcome explicit_run = run_case(*make_backend(true), *data);
  EXPECT_EQ(explicit_run.status.code(), ErrorCode::kUnsupported);
  EXPECT_NE(explicit_run.status.message().find("CUDNN_ATTN was explicitly selected but cuDNN FMHA does not support "
                                               "key/value sequence length 1. Select TORCH_SDPA or another backend "
                                               "for this shape."),
            std::string::npos)
      << explicit_run.status.message();
  const Outcome automatic = run_case(*make_backend(false), *data);
  ASSERT_TRUE(automatic.status.ok()) << automatic.status.message();
  EXPECT_EQ(automatic.mismatch, "");
}

// Key-padding masks that are not a non-empty prefix: a dropped key before kept ones (the bias hides
// it inside the batch's key span), a batch that keeps no key (its rows give zeros and LSE -inf),
// with and without causal.
TEST(GpuCudnnAttn, KeyPaddingMasksThatAreNotPrefixesMatchTheOracle) {
  SKIP_WITHOUT_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (bool causal : {false, true}) {
    ParityCase c;
    c.dtype = causal ? DType::kFloat16 : DType::kBFloat16;
    c.batch = 3, c.seq_q = 40, c.seq_kv = 67, c.head_size = c.head_size_v = 64, c.lse = true, c.causal = causal;
    c.mask = testing::MaskShape::kKeyPadding;
    auto data = testing::make_case_data(c, rng);
    make_mask_a_prefix(*data, rng);
    const TensorView& m = *data->problem.mask;
    testing::write_element(m, m.stride(0) + 0, 0.0);  // batch 1 drops key 0 but keeps later keys
    testing::write_element(m, m.stride(0) + 1, 1.0);
    for (std::int64_t j = 0; j < c.seq_kv; ++j) testing::write_element(m, 2 * m.stride(0) + j, 0.0);  // batch 2: none
    const Outcome o = run_case(*make_backend(true), *data);
    ASSERT_TRUE(o.status.ok()) << o.status.message();
    EXPECT_EQ(o.mismatch, "") << c.name() << " (seed " << seed << ")";
  }
}

// DiT-sized masked and packed calls: FLUX.1's padded prompt as a dense [1, 1, S, S] mask, a
// per-head block mask, and three packed sequences of a video batch with the LSE.
TEST(GpuCudnnAttn, DiTMasksAndPackedBatchesMatchTheOracle) {
  SKIP_WITHOUT_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  ParityCase flux;
  flux.dtype = DType::kBFloat16;
  flux.seq_q = flux.seq_kv = 512 + 128, flux.heads_q = flux.heads_kv = 3, flux.head_size = flux.head_size_v = 128;
  flux.mask = testing::MaskShape::kDenseBroadcast, flux.lse = true;
  ParityCase blocks = flux;
  blocks.dtype = DType::kFloat16;
  blocks.batch = 2, blocks.mask = testing::MaskShape::kDensePerHead, blocks.block_mask = true;
  blocks.head_size = blocks.head_size_v = 64;
  ParityCase packed = flux;
  packed.mask = testing::MaskShape::kNone, packed.varlen = true, packed.seq_q = packed.seq_kv = 900;
  packed.layout = testing::Layout::kPackedQkv;
  for (const ParityCase& c : {flux, blocks, packed}) {
    auto data = testing::make_case_data(c, rng);
    if (c.mask == testing::MaskShape::kDenseBroadcast) {  // keep 77 of the first 512 keys (the prompt)
      const TensorView& m = *data->problem.mask;
      for (std::int64_t i = 0; i < c.seq_q; ++i)
        for (std::int64_t j = 0; j < c.seq_kv; ++j) testing::write_element(m, i * c.seq_kv + j, j < 77 || j >= 512);
    }
    const Outcome o = run_case(*make_backend(true), *data);
    ASSERT_TRUE(o.status.ok()) << c.name() << ": " << o.status.message();
    EXPECT_EQ(o.mismatch, "") << c.name() << " (seed " << seed << ")";
  }
}

TEST(GpuCudnnAttn, UnsupportedHeadSizeUsesTheSeedsMessage) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(fresh_seed());
  ParityCase c;
  c.dtype = DType::kBFloat16;
  c.seq_q = c.seq_kv = 16, c.head_size = c.head_size_v = 12;
  auto data = testing::make_case_data(c, rng);
  const Outcome o = run_case(*make_backend(true), *data);
  EXPECT_EQ(o.status.code(), ErrorCode::kUnsupported);
  EXPECT_NE(o.status.message().find("head_size=12 is unsupported"), std::string::npos) << o.status.message();
}

// Key padding is gathered (the kept keys copied to the front of K and V, cuDNN given their counts)
// where the call is not causal, and spanned (lengths to the last kept key plus a bias) where it is:
// a prompt padded in the middle of a joint sequence (FLUX.1's layout) with GQA and the LSE, one
// batch keeping no key, both dtypes and head sizes 64 and 128, K and V in a packed QKV buffer.
TEST(GpuCudnnAttn, GatheredAndSpannedKeyPaddingMatchTheOracle) {
  SKIP_WITHOUT_GPU();
  auto backend = make_backend(true);
  ASSERT_NE(backend, nullptr);
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int variant = 0; variant < 4; ++variant) {
    ParityCase c;
    c.dtype = variant % 2 ? DType::kFloat16 : DType::kBFloat16;
    c.batch = 3, c.seq_q = 200, c.seq_kv = 700, c.heads_q = 6, c.heads_kv = 2;
    c.head_size = c.head_size_v = variant == 3 ? 64 : 128;
    c.mask = testing::MaskShape::kKeyPadding, c.lse = true, c.causal = variant == 2;
    if (variant == 1) c.heads_kv = c.heads_q, c.seq_kv = c.seq_q = 700, c.layout = testing::Layout::kPackedQkv;
    c.text_keys = 300, c.prompt_keep = 77;  // kept: 77 prompt keys, then every key after the text
    auto data = testing::make_case_data(c, rng);
    const TensorView& m = *data->problem.mask;
    for (std::int64_t j = 0; j < c.seq_kv; ++j) testing::write_element(m, 2 * m.stride(0) + j, 0.0);  // batch 2: none
    const Outcome o = run_case(*backend, *data);
    ASSERT_TRUE(o.status.ok()) << o.status.message();
    EXPECT_EQ(o.mismatch, "") << c.name() << " variant " << variant << " (seed " << seed << ")";
  }
}

// A key-padding or dense-masked call only enqueues work: its stream is held by a host callback
// until forward has returned (a call that waited for the stream would never return), then the
// result is checked. Warmed up first, as CUDA-graph capture requires, so no buffer grows.
TEST(GpuCudnnAttn, MaskedCallsDoNotWaitForTheirStream) {
  SKIP_WITHOUT_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (testing::MaskShape mask : {testing::MaskShape::kKeyPadding, testing::MaskShape::kDenseBroadcast}) {
    ParityCase c;
    c.dtype = DType::kBFloat16;
    c.batch = 2, c.seq_q = 300, c.seq_kv = 520, c.heads_q = 4, c.heads_kv = 2, c.head_size = c.head_size_v = 128;
    c.mask = mask, c.lse = true;
    SCOPED_TRACE(c.name());
    auto data = testing::make_case_data(c, rng);
    make_mask_a_prefix(*data, rng);
    testing::Expectation expected = testing::expect(data->problem);
    testing::DeviceCase device(*data);
    ASSERT_TRUE(device.ok());
    auto backend = make_backend(true);
    ASSERT_TRUE(backend->forward(device.problem(), stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::atomic<bool> release{false};
    const cudaHostFn_t hold = [](void* flag) {
      while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    ASSERT_EQ(cudaLaunchHostFunc(stream, hold, &release), cudaSuccess);
    auto call = std::async(std::launch::async, [&] { return backend->forward(device.problem(), stream); });
    const bool returned = call.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    release = true;
    EXPECT_TRUE(returned) << "forward waited for its stream";
    const Status s = call.get();
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_TRUE(device.copy_back());
    EXPECT_EQ(testing::compare(data->problem, expected), "") << "seed " << seed;
  }
  cudaStreamDestroy(stream);
}

// After the first call of a shape, later calls allocate no device memory.
TEST(GpuCudnnAttn, WarmCallsAllocateNothing) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(fresh_seed());
  for (testing::MaskShape mask : {testing::MaskShape::kKeyPadding, testing::MaskShape::kDensePerBatch,
                                  testing::MaskShape::kNone}) {
    ParityCase c;
    c.dtype = DType::kBFloat16;
    c.batch = 2, c.seq_q = c.seq_kv = 512, c.heads_q = 8, c.heads_kv = 8, c.head_size = c.head_size_v = 128;
    c.mask = mask, c.lse = true, c.varlen = mask == testing::MaskShape::kNone;
    SCOPED_TRACE(c.name());
    auto data = testing::make_case_data(c, rng);
    make_mask_a_prefix(*data, rng);
    testing::DeviceCase device(*data);
    ASSERT_TRUE(device.ok());
    auto backend = make_backend(true);
    ASSERT_TRUE(backend->forward(device.problem(), nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::size_t free_before = 0, free_after = 0, total = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(backend->forward(device.problem(), nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
    EXPECT_EQ(free_before, free_after);
  }
}

#else

TEST(GpuCudnnAttn, MatchesTheOracleOnEverySupportedParityCase) { GTEST_SKIP() << "this diffattn build has no CUDA"; }
TEST(GpuCudnnAttn, MatchesTheOracleOnDiTShapes) { GTEST_SKIP() << "this diffattn build has no CUDA"; }

TEST(GpuCudnnAttn, FactoryReportsUnavailableInABuildWithoutCuda) {
  auto created = create_cudnn_attn_backend(BackendInit{});
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(created.status().message().find("TORCH_SDPA"), std::string::npos);
}

#endif

}  // namespace
}  // namespace diffattn
