// Dependent launches (kernels/cuda/dependent_launch.cuh) let a call's later kernels start while the
// kernel before them finishes. Calls queued back to back on one stream, on two different inputs
// that take the same workspace from the pool, must each give the bits the call gives alone: a kernel
// that read its predecessor's output (or wrote over what it still reads) before waiting for it would
// mix the two inputs. Run on every multi-kernel path: SAGE_ATTN with and without its Q pass and with
// a split last wave (merge kernel), FLASHINFER_ATTN's QK16/V8 mode, FLASH_ATTN with a key-padding
// mask (the compact walk's plan kernel) and with a dense mask (its lists).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/dependent_launch.h"
#include "parity/parity_check.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "gpu/device_case.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/cuda/sage/run_sage_attn.h"
#endif

namespace diffattn {
namespace {

TEST(DependentLaunch, TheSwitchIsOnUnlessTurnedOff) {
  EXPECT_TRUE(cuda::dependent_launch_setting(nullptr));
  EXPECT_TRUE(cuda::dependent_launch_setting("1"));
  EXPECT_FALSE(cuda::dependent_launch_setting("0"));
  EXPECT_TRUE(cuda::dependent_launch_setting("off"));  // not a value it knows: warns, stays on
  EXPECT_TRUE(cuda::dependent_launch_setting(""));
  // The process's own setting, read once.
  const char* env = std::getenv("DIFFATTN_DEPENDENT_LAUNCH");
  EXPECT_EQ(cuda::dependent_launch_enabled(), cuda::dependent_launch_setting(env));
}

#if DIFFATTN_HAVE_CUDA

using testing::ParityCase;

using CallFn = std::function<Status(const AttentionProblem&, cudaStream_t)>;

struct Path {
  std::string name;
  CallFn run;
  ParityCase shape;
};

bool hopper_here() {
  if (!testing::cuda_device_present()) return false;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major == 9 && minor == 0;
}

ParityCase path_case(std::int64_t seq_q, std::int64_t d, testing::MaskShape mask) {
  ParityCase c;
  c.dtype = DType::kBFloat16;
  c.head_size = c.head_size_v = d;
  c.batch = 2;
  c.heads_q = 8;
  c.heads_kv = 4;
  c.seq_q = seq_q;
  c.seq_kv = 2300;  // 18 key blocks, the last one partial; the means over 18 statistics chunks
  c.mask = mask;
  c.lse = false;
  return c;
}

std::size_t span_bytes(const TensorView& out) {
  const std::int64_t last = (out.size(0) - 1) * out.stride(0) + (out.size(1) - 1) * out.stride(1) +
                            (out.size(2) - 1) * out.stride(2) + out.size(3);
  return static_cast<std::size_t>(last) * 2;  // 16-bit elements
}

std::vector<std::uint8_t> read_bytes(const void* device, std::size_t bytes) {
  std::vector<std::uint8_t> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(GpuDependentLaunch, BackToBackCallsGiveEachCallsOwnBits) {
  if (!hopper_here()) GTEST_SKIP() << "no sm_90 GPU here (dependent launches are a Hopper feature)";
  const std::uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  const auto sage_fp8 = [](int fuse_q) {
    return [fuse_q](const AttentionProblem& p, cudaStream_t s) {
      sage::SageKernelChoice choice;
      choice.fuse_q = fuse_q;
      return sage::run_sage_attn_cuda(p, sage::PvMode::kFp8, s, choice);
    };
  };
  const CallFn qk16 = [](const AttentionProblem& p, cudaStream_t s) { return sage::run_qk16_v8_cuda(p, s); };
  const CallFn flash = [](const AttentionProblem& p, cudaStream_t s) { return flash::run_flash_attn_cuda(p, s); };
  using testing::MaskShape;
  const std::vector<Path> paths = {
      {"SAGE_ATTN fp8, Q pass, key padding", sage_fp8(0), path_case(1500, 128, MaskShape::kKeyPadding)},
      {"SAGE_ATTN fp8, Q in the kernel", sage_fp8(1), path_case(1500, 128, MaskShape::kNone)},
      {"SAGE_ATTN fp8 hd64, split last wave (merge)", sage_fp8(-1), path_case(130, 64, MaskShape::kKeyPadding)},
      {"SAGE_ATTN fp16 P V", [](const AttentionProblem& p,
                                cudaStream_t s) { return sage::run_sage_attn_cuda(p, sage::PvMode::kFp16, s); },
       path_case(700, 128, MaskShape::kNone)},
      {"FLASHINFER_ATTN QK16/V8, key padding", qk16, path_case(1500, 128, MaskShape::kKeyPadding)},
      {"FLASH_ATTN, key padding (compact walk)", flash, path_case(1500, 128, MaskShape::kKeyPadding)},
      {"FLASH_ATTN hd64, key padding, split last wave", flash, path_case(130, 64, MaskShape::kKeyPadding)},
      {"FLASHINFER_ATTN, dense mask (listed walk)",
       [](const AttentionProblem& p, cudaStream_t s) { return flash::run_masked_cuda(p, s); },
       path_case(700, 128, MaskShape::kDensePerHead)},
  };
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (const Path& path : paths) {
    const std::string what = path.name + " (seed " + std::to_string(seed) + ")";
    // Two inputs of one shape: different values and different masks.
    auto a = testing::make_case_data(path.shape, rng);
    auto b = testing::make_case_data(path.shape, rng);
    testing::DeviceCase da(*a), db(*b);
    ASSERT_TRUE(da.ok() && db.ok()) << what;
    const std::size_t bytes = span_bytes(da.problem().out);
    // Each input alone, the stream idle before and after.
    std::vector<std::vector<std::uint8_t>> alone;
    for (testing::DeviceCase* d : {&da, &db}) {
      ASSERT_EQ(cudaMemset(d->problem().out.data, 0xff, bytes), cudaSuccess) << what;
      const Status st = path.run(d->problem(), stream);
      ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << what;
      alone.push_back(read_bytes(d->problem().out.data, bytes));
    }
    ASSERT_NE(alone[0], alone[1]) << what << ": the two inputs should give different outputs";
    // Six calls, alternating, queued without waiting, each into its own output.
    constexpr int kCalls = 6;
    std::vector<void*> outs(kCalls, nullptr);
    for (void*& o : outs) {
      ASSERT_EQ(cudaMalloc(&o, bytes), cudaSuccess) << what;
      ASSERT_EQ(cudaMemset(o, 0xff, bytes), cudaSuccess) << what;
    }
    for (int i = 0; i < kCalls; ++i) {
      AttentionProblem p = (i % 2 == 0 ? da : db).problem();
      p.out.data = outs[i];
      const Status st = path.run(p, stream);
      ASSERT_TRUE(st.ok()) << what << ", call " << i << ": " << st.ToString();
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << what;
    for (int i = 0; i < kCalls; ++i)
      EXPECT_TRUE(read_bytes(outs[i], bytes) == alone[i % 2]) << what << ": call " << i << " differs from its input alone";
    for (void* o : outs) cudaFree(o);
  }
  cudaStreamDestroy(stream);
}

#endif  // DIFFATTN_HAVE_CUDA

}  // namespace
}  // namespace diffattn
