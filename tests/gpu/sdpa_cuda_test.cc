// TORCH_SDPA's CUDA kernels called directly against the float64 oracle on multi-tile shapes of
// every compiled bucket, and their head-size refusal. The parity cases, fully masked rows,
// refusals and graph replay are the parity harness's (tests/parity/), as for every backend.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cuda/sdpa_cuda.h"
#include "parity/parity_check.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "gpu/device_case.h"
#endif

namespace diffattn {
namespace {

using testing::ParityCase;

#if DIFFATTN_HAVE_CUDA

#define SKIP_WITHOUT_GPU() \
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device on this machine"

std::uint64_t fresh_seed() {
  std::random_device source;
  return (static_cast<std::uint64_t>(source()) << 32) | source();
}

// Runs `c` on the GPU and compares with the oracle; returns the failure text (empty: pass).
std::string run_case(const ParityCase& c, std::mt19937_64& rng) {
  auto data = testing::make_case_data(c, rng);
  if (Status valid = validate_problem(data->problem); !valid.ok()) return "invalid case: " + valid.message();
  testing::Expectation expected = testing::expect(data->problem);
  testing::DeviceCase device(*data);
  if (!device.ok()) return "could not copy the case to the GPU";
  if (Status s = run_sdpa_cuda(device.problem(), nullptr); !s.ok()) return "run_sdpa_cuda: " + s.message();
  if (!device.copy_back()) return "could not copy the outputs back";
  return testing::compare(data->problem, expected);
}

// Shapes that reach the tensor-core kernel's multi-tile paths: several query and key tiles,
// partial last tiles, causal diagonals and GQA, for every compiled head-dim bucket.
TEST(GpuSdpaCuda, TensorCoreBucketsMatchTheOracleOnMultiTileShapes) {
  SKIP_WITHOUT_GPU();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (std::int64_t d : {32, 40, 64, 96, 128, 160, 192, 256}) {
      ParityCase c;
      c.dtype = dtype;
      c.head_size = c.head_size_v = d;
      c.seq_q = 200 + 37 * (idx % 3);
      c.seq_kv = idx % 2 ? 300 : 131;
      c.heads_q = 4, c.heads_kv = idx % 2 ? 2 : 4;
      c.causal = idx % 3 == 0;
      c.mask = idx % 4 == 1 ? testing::MaskShape::kKeyPadding : testing::MaskShape::kNone;
      c.lse = true;
      EXPECT_EQ(run_case(c, rng), "") << c.name() << " (seed " << seed << ")";
      ++idx;
    }
  }
}

TEST(GpuSdpaCuda, HeadSizesAbove512AreRefusedWithAReason) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(fresh_seed());
  ParityCase c;
  c.seq_q = c.seq_kv = 4, c.heads_q = c.heads_kv = 1, c.head_size = c.head_size_v = 520;
  auto data = testing::make_case_data(c, rng);
  testing::DeviceCase device(*data);
  ASSERT_TRUE(device.ok());
  const Status s = run_sdpa_cuda(device.problem(), nullptr);
  if (validate_problem(device.problem()).ok()) {
    EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
    EXPECT_NE(s.message().find("512"), std::string::npos) << s.message();
  }
}

#else

TEST(GpuSdpaCuda, TensorCoreBucketsMatchTheOracleOnMultiTileShapes) { GTEST_SKIP() << "this diffattn build has no CUDA"; }
TEST(GpuSdpaCuda, ReportsUnavailableInABuildWithoutCuda) {
  AttentionProblem p;
  const Status s = run_sdpa_cuda(p, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_NE(s.message().find("CUDA"), std::string::npos);
}

#endif

}  // namespace
}  // namespace diffattn
