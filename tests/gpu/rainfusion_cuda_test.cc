// RAINFUSION_ATTN's CUDA path against its CPU path: on the same inputs it recognises the same
// head patterns and lists the same tiles (float32 block scores may order near-ties differently);
// given the GPU's own lists its output is the CPU block-sparse kernel's over the inputs in tile
// order; at sparsity 0 and inside the dense step window it is FLASH_ATTN's dense attention; and
// its refusals write nothing; NaN inputs give NaN rows; a capture in a CUDA graph replays the
// direct call. The backend through the layer on the parity cases is the GPU parity harness's
// (tests/parity/gpu_parity_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/rainfusion_reference.h"
#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "kernels/cpu/rainfusion_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cpu/view_access.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/cuda/sparse/rainfusion_cuda.h"
#include "parity/cases.h"
#include "parity/properties.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>

#include "gpu/device_case.h"
#endif

namespace diffattn {
namespace {

#if DIFFATTN_HAVE_CUDA

using testing::fresh_seed;
using testing::hopper_present;

#define SKIP_WITHOUT_HOPPER() \
  if (!hopper_present()) GTEST_SKIP() << "no sm_90 device here: RAINFUSION_ATTN's CUDA path is Hopper's"


VideoGeometry geometry(std::int64_t frames, std::int64_t height, std::int64_t width, std::int64_t text_before,
                       std::int64_t text_after) {
  VideoGeometry g{frames, height, width};
  g.text_before = text_before, g.text_after = text_after;
  return g;
}

// Several 128-token tiles a frame with partial patches at the far edges (patches of 6 x 20 and
// 6 x 21, the fewest for those frames), text after, before or on both sides of the video (over two
// tiles where it is long), frames under 8 tokens high (patches 5 x 25) and under 16 wide (patches
// 10 x 12, the last of 8 rows).
const VideoGeometry kGeometries[] = {geometry(3, 10, 20, 0, 150), geometry(4, 12, 40, 37, 0),
                                     geometry(4, 5, 60, 20, 150), geometry(5, 28, 12, 0, 0)};

struct RainCase {
  VideoGeometry video;
  DType dtype = DType::kBFloat16;
  std::int64_t head_size = 64, heads_q = 4, heads_kv = 2, batch = 1;
  testing::Layout layout = testing::Layout::kContiguous;
  bool misaligned = false;  // q and out start one element past 16 bytes: element-wise copies

  std::string name() const {
    return std::string(dtype_name(dtype)) + "_d" + std::to_string(head_size) + "_h" + std::to_string(heads_q) + "x" +
           std::to_string(heads_kv) + "_b" + std::to_string(batch) + "_video" + std::to_string(video.frames) + "x" +
           std::to_string(video.height) + "x" + std::to_string(video.width) + "_text" +
           std::to_string(video.text_before) + "+" + std::to_string(video.text_after) +
           (misaligned ? "_misaligned" : "");
  }
};

using testing::misaligned_copy;

std::unique_ptr<testing::CaseData> make_data(const RainCase& rc, std::mt19937_64& rng) {
  testing::ParityCase c;
  c.dtype = rc.dtype;
  c.video = rc.video;
  c.seq_q = c.seq_kv = rc.video.sequence_length();
  c.batch = rc.batch;
  c.heads_q = rc.heads_q, c.heads_kv = rc.heads_kv;
  c.head_size = c.head_size_v = rc.head_size;
  c.layout = rc.layout;
  auto data = testing::make_case_data(c, rng);
  if (rc.misaligned) {
    AttentionProblem& p = data->problem;
    p.q = misaligned_copy(*data, p.q);
    p.out = misaligned_copy(*data, p.out);
    testing::poison(p.out);
  }
  return data;
}

// Runs `call` (a change to the device problem, or none) on the GPU and brings out back into the
// host buffers.
Status run_on_gpu(testing::CaseData& data, const std::function<Status(const AttentionProblem&)>& call) {
  testing::DeviceCase device(data);
  if (!device.ok()) return Internal("could not copy the case to the GPU");
  const Status status = call(device.problem());
  if (!device.copy_back()) return Internal("could not copy the outputs back (" + status.ToString() + ")");
  return status;
}

// The listed (query tile, key tile) pairs the two layouts share, over all the first lists; 0 when
// their rows differ in length.
double shared_entries(const BlockSparseLayout& a, const BlockSparseLayout& b) {
  if (a.offsets != b.offsets || a.indices.empty()) return 0.0;
  std::int64_t shared = 0;
  for (std::size_t r = 0; r + 1 < a.offsets.size(); ++r) {
    std::int32_t i = a.offsets[r], j = b.offsets[r];
    while (i < a.offsets[r + 1] && j < b.offsets[r + 1]) {
      if (a.indices[i] == b.indices[j]) ++shared, ++i, ++j;
      else if (a.indices[i] < b.indices[j]) ++i;
      else ++j;
    }
  }
  return static_cast<double>(shared) / static_cast<double>(a.indices.size());
}

// What the GPU should write for host problem `p` given its lists: the CPU block-sparse kernel over
// the inputs in tile order, back in token order, [B, S, Hq, D] row-major.
Result<std::vector<double>> expected_output(const AttentionProblem& p, const RainFusionPlan& plan) {
  const RainTiles& tiles = plan.tiles;
  const std::int64_t batch = p.q.size(0), tokens = p.q.size(1), hq = p.q.size(2), hkv = p.k.size(2);
  const std::int64_t d = p.q.size(3), padded = tiles.padded_length();
  std::vector<float> q = cpu::gather_into_slots(p.q, tiles.slot, padded);
  std::vector<float> k = cpu::gather_into_slots(p.k, tiles.slot, padded);
  std::vector<float> v = cpu::gather_into_slots(p.v, tiles.slot, padded);
  std::vector<float> fine_out(static_cast<std::size_t>(batch * padded * hq * d), 0.f);
  AttentionProblem fine;
  fine.q = TensorView::Contiguous(q.data(), DType::kFloat32, {batch, padded, hq, d});
  fine.k = TensorView::Contiguous(k.data(), DType::kFloat32, {batch, padded, hkv, d});
  fine.v = TensorView::Contiguous(v.data(), DType::kFloat32, {batch, padded, hkv, d});
  fine.out = TensorView::Contiguous(fine_out.data(), DType::kFloat32, {batch, padded, hq, d});
  fine.scale = p.softmax_scale();
  DIFFATTN_RETURN_IF_ERROR(run_block_sparse_cpu(fine, plan.layout));
  std::vector<double> want(static_cast<std::size_t>(batch * tokens * hq * d));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < tokens; ++i) {
      const std::int64_t slot = tiles.slot[static_cast<std::size_t>(i)];
      for (std::int64_t h = 0; h < hq; ++h)
        for (std::int64_t e = 0; e < d; ++e)
          want[((b * tokens + i) * hq + h) * d + e] = fine_out[((b * padded + slot) * hq + h) * d + e];
    }
  return want;
}

// Empty when every element of `out` is within atol + rtol x |want| of `want`, else the worst one.
std::string compare(const TensorView& out, const std::vector<double>& want, double atol, double rtol) {
  double worst = 0.0;
  std::string where;
  for (std::int64_t b = 0; b < out.size(0); ++b)
    for (std::int64_t i = 0; i < out.size(1); ++i)
      for (std::int64_t h = 0; h < out.size(2); ++h)
        for (std::int64_t e = 0; e < out.size(3); ++e) {
          const double w = want[static_cast<std::size_t>(((b * out.size(1) + i) * out.size(2) + h) * out.size(3) + e)];
          const double got = testing::read_element(out, testing::element_offset(out, {b, i, h, e}));
          const double excess = std::isnan(got) ? std::numeric_limits<double>::infinity()
                                                : std::fabs(got - w) - (atol + rtol * std::fabs(w));
          if (excess > worst) {
            worst = excess;
            where = "token " + std::to_string(i) + " head " + std::to_string(h) + " channel " + std::to_string(e) +
                    " of batch entry " + std::to_string(b) + ": got " + std::to_string(got) + ", want " +
                    std::to_string(w);
          }
        }
  return where;
}

double atol_for(DType dtype) { return dtype == DType::kBFloat16 ? 2e-2 : 4e-3; }
double rtol_for(DType dtype) { return dtype == DType::kBFloat16 ? 2e-2 : 4e-3; }

std::string pattern_names(const std::vector<RainPattern>& patterns) {
  std::string text;
  for (RainPattern p : patterns) text += std::string(text.empty() ? "" : " ") + std::string(rain_pattern_name(p));
  return text;
}

// (a) and (b): both dtypes and head sizes, GQA, sparsity 0.5 and 0.8, on every geometry.
void check_plan_and_output(flash::BlockSparseKernel kernel) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128}) {
      RainCase rc;
      rc.video = kGeometries[idx % 4];
      rc.dtype = dtype;
      rc.head_size = d;
      rc.heads_q = idx % 2 ? 3 : 4;
      rc.heads_kv = idx % 2 ? 1 : 2;
      rc.batch = idx == 1 ? 2 : 1;
      rc.layout = idx == 2 ? testing::Layout::kHeadMajor : testing::Layout::kContiguous;
      rc.misaligned = idx == 3;
      ++idx;
      auto data = make_data(rc, rng);
      for (double sparsity : {0.5, 0.8}) {
        SCOPED_TRACE(rc.name() + " sparsity " + std::to_string(sparsity) + " (seed " + std::to_string(seed) + ")");
        RainFusionParams params;
        params.sparsity = sparsity;
        RainFusionPlan cpu_plan, gpu_plan;
        ASSERT_TRUE(run_rainfusion_cpu(data->problem, params, &cpu_plan).ok());
        testing::poison(data->problem.out);
        const Status s = run_on_gpu(*data, [&](const AttentionProblem& p) {
          return run_rainfusion_cuda(p, params, nullptr, &gpu_plan, kernel);
        });
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(gpu_plan.patterns, cpu_plan.patterns)
            << "GPU: " << pattern_names(gpu_plan.patterns) << "; CPU: " << pattern_names(cpu_plan.patterns);
        EXPECT_EQ(gpu_plan.layout.offsets, cpu_plan.layout.offsets);
        EXPECT_EQ(gpu_plan.layout.tile_rows, cpu_plan.layout.tile_rows);
        const double shared = shared_entries(gpu_plan.layout, cpu_plan.layout);
        EXPECT_GE(shared, 0.99) << "the GPU's lists share only " << shared << " of the CPU's entries";
        EXPECT_DOUBLE_EQ(gpu_plan.video_density, cpu_plan.video_density);
        for (std::size_t p = 0; p < 3; ++p)
          for (std::size_t h = 0; h < cpu_plan.captured[p].size(); ++h)
            EXPECT_NEAR(gpu_plan.captured[p][h], cpu_plan.captured[p][h], 1e-4) << "pattern " << p << " head " << h;
        auto want = expected_output(data->problem, gpu_plan);
        ASSERT_TRUE(want.ok()) << want.status().message();
        EXPECT_EQ(compare(data->problem.out, *want, atol_for(dtype), rtol_for(dtype)), "");
        std::printf("[ RAINFUSION ] %s sparsity %.1f: patterns %s, %.4f of the CPU's entries, video density %.3f\n",
                    rc.name().c_str(), sparsity, pattern_names(gpu_plan.patterns).c_str(), shared,
                    gpu_plan.video_density);
      }
    }
}

TEST(GpuRainfusion, PlanIsTheCpuPlanAndOutputIsTheBlockSparseKernelsOverIt) {
  SKIP_WITHOUT_HOPPER();
  check_plan_and_output(flash::BlockSparseKernel::kForDevice);
}

// The fine pass on the mma.sync walk, the kernel Ampere and Ada run (compute_80 code here).
TEST(GpuRainfusion, AmpereWalkPlanIsTheCpuPlanAndOutputIsTheBlockSparseKernelsOverIt) {
  if (!testing::sm80_or_newer_present()) GTEST_SKIP() << "no sm_80 or newer device here for the mma.sync walk";
  check_plan_and_output(flash::BlockSparseKernel::kAmpere);
}

// precision fp8 and mix on the GPU: SAGE_ATTN's block-sparse walk over the GPU's plan. Against the
// CPU path of the same precision (float64 plan scores), the two differ by less than either differs
// from the bf16 pass, whose error the GPU's stays within 10 % of.
TEST(GpuRainfusion, EightBitPrecisionsMatchTheCpuPathOfTheSameArithmetic) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128}) {
      RainCase rc;
      rc.video = kGeometries[idx % 4];
      rc.dtype = dtype;
      rc.head_size = d;
      rc.heads_q = idx % 2 ? 3 : 4;
      rc.heads_kv = idx % 2 ? 1 : 2;
      ++idx;
      auto data = make_data(rc, rng);
      RainFusionParams bf16;
      ASSERT_TRUE(run_rainfusion_cpu(data->problem, bf16).ok());
      const std::vector<double> reference = testing::output_values(data->problem.out);
      for (RainPrecision precision : {RainPrecision::kFp8, RainPrecision::kMix}) {
        SCOPED_TRACE(rc.name() + " " + rain_precision_name(precision) + " (seed " + std::to_string(seed) + ")");
        RainFusionParams params;
        params.precision = precision;
        ASSERT_TRUE(run_rainfusion_cpu(data->problem, params).ok());
        const std::vector<double> cpu = testing::output_values(data->problem.out);
        testing::poison(data->problem.out);
        const Status s = run_on_gpu(*data, [&](const AttentionProblem& p) {
          return run_rainfusion_cuda(p, params, nullptr);
        });
        ASSERT_TRUE(s.ok()) << s.message();
        const std::vector<double> gpu = testing::output_values(data->problem.out);
        const double e_cpu = testing::relative_l2(cpu, reference), e_gpu = testing::relative_l2(gpu, reference);
        const double apart = testing::relative_l2(gpu, cpu);
        std::printf("[ RAINFUSION ] %s %s: cpu %.4f gpu %.4f against bf16, gpu-cpu %.4f\n", rc.name().c_str(),
                    rain_precision_name(precision), e_cpu, e_gpu, apart);
        EXPECT_GT(e_cpu, 0.0);
        EXPECT_LE(e_gpu, 1.10 * e_cpu);
        EXPECT_LT(apart, e_cpu);
      }
    }
  // The mma.sync walk has no 8-bit path: refused before anything runs.
  RainCase rc;
  rc.video = kGeometries[0];
  auto data = make_data(rc, rng);
  RainFusionParams fp8;
  fp8.precision = RainPrecision::kFp8;
  testing::poison(data->problem.out);
  const Status s = run_on_gpu(*data, [&](const AttentionProblem& p) {
    return run_rainfusion_cuda(p, fp8, nullptr, nullptr, flash::BlockSparseKernel::kAmpere);
  });
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("set block_sparse.precision to 'bf16'"), std::string::npos) << s.message();
  EXPECT_EQ(testing::check_untouched(data->problem), "");
}

Result<Attention> rainfusion_layer(const AttentionProblem& p, std::optional<BlockSparseSpec> block) {
  auto info = probe_cuda_platform(0);
  if (!info.ok()) return info.status();
  return testing::rainfusion_layer(p, std::move(block), *info);
}

std::vector<double> out_values(const AttentionProblem& p) {
  std::vector<double> values;
  testing::for_each_offset(p.out, [&](std::int64_t off) { values.push_back(testing::read_element(p.out, off)); });
  return values;
}

// The largest |a - b| over |b| + 1e-3, elementwise.
double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / (std::fabs(b[i]) + 1e-3));
  return worst;
}

// (c): sparsity 0 and the dense step window run FLASH_ATTN's dense kernel; a step outside the
// window runs sparse. FLASH_ATTN's split tail tiles are merged by whichever piece finishes last, so
// two dense runs agree to the last bits of the half-precision output, not bit for bit.
TEST(GpuRainfusion, SparsityZeroAndTheStepWindowRunFlashAttnDense) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (std::int64_t d : {64, 128}) {
    RainCase rc;
    rc.video = kGeometries[d == 64 ? 0 : 1];
    rc.dtype = d == 64 ? DType::kBFloat16 : DType::kFloat16;
    rc.head_size = d;
    auto data = make_data(rc, rng);
    SCOPED_TRACE(rc.name() + " (seed " + std::to_string(seed) + ")");
    const auto run_dense = [](const AttentionProblem& p) { return flash::run_flash_attn_cuda(p, nullptr); };
    ASSERT_TRUE(run_on_gpu(*data, run_dense).ok());
    const std::vector<double> dense = out_values(data->problem);
    const double half_ulps = rc.dtype == DType::kBFloat16 ? 2.0 / 256 : 2.0 / 2048;  // two units in the last place
    BlockSparseSpec zero;
    zero.sparsity = 0.0;
    BlockSparseSpec window;
    window.sparsity = 0.8, window.start_step = 3, window.end_step = 2;
    struct Call {
      BlockSparseSpec options;
      std::int64_t step;
      bool dense;
    };
    const Call calls[] = {{zero, 5, true}, {window, 0, true}, {window, 9, true}, {window, 5, false}};
    for (const Call& call : calls) {
      auto layer = rainfusion_layer(data->problem, call.options);
      ASSERT_TRUE(layer.ok()) << layer.status().message();
      testing::poison(data->problem.out);
      const Status s = run_on_gpu(*data, [&](const AttentionProblem& p) {
        AttentionProblem run = p;
        run.denoising = DenoisingStep{call.step, 10, std::nullopt, std::nullopt};
        return layer->forward(run, nullptr);
      });
      ASSERT_TRUE(s.ok()) << s.message();
      const double diff = max_relative_difference(out_values(data->problem), dense);
      if (call.dense) EXPECT_LE(diff, half_ulps) << "step " << call.step;
      else EXPECT_GT(diff, 0.05) << "step " << call.step << " ran dense";
    }
  }
}

// (d): every refusal leaves out as it was.
TEST(GpuRainfusion, RefusalsWriteNothing) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  RainCase base;
  base.video = kGeometries[3];  // 5 frames of 3 patches: at sparsity 0.5 every head ranks by score
  struct Bad {
    const char* what;
    std::function<void(RainCase&)> change_case;
    std::function<void(AttentionProblem&, RainFusionParams&)> change_call;
    ErrorCode code;
    const char* message;
  };
  const auto same_case = [](RainCase&) {};
  const auto same_call = [](AttentionProblem&, RainFusionParams&) {};
  const Bad cases[] = {
      {"no geometry", same_case, [](AttentionProblem& p, RainFusionParams&) { p.video.reset(); },
       ErrorCode::kInvalidInput, "AttentionProblem::video"},
      {"causal", same_case, [](AttentionProblem& p, RainFusionParams&) { p.causal = true; }, ErrorCode::kUnsupported,
       "no mask, cu_seqlens, causal flag or lse"},
      {"sparsity out of range", same_case, [](AttentionProblem&, RainFusionParams& r) { r.sparsity = 1.5; },
       ErrorCode::kInvalidInput, "sparsity must be in [0, 1]"},
      {"float32", [](RainCase& c) { c.dtype = DType::kFloat32; }, same_call, ErrorCode::kUnsupported,
       "float16 or bfloat16"},
      {"head size 96", [](RainCase& c) { c.head_size = 96; }, same_call, ErrorCode::kUnsupported,
       "head sizes 64, 128"},
      {"a negative scale", same_case, [](AttentionProblem& p, RainFusionParams&) { p.scale = -0.1f; },
       ErrorCode::kUnsupported, "positive softmax scale"},
  };
  for (const Bad& bad : cases) {
    RainCase rc = base;
    bad.change_case(rc);
    auto data = make_data(rc, rng);
    RainFusionParams params;
    params.sparsity = 0.5;
    const Status s = run_on_gpu(*data, [&](const AttentionProblem& p) {
      AttentionProblem call = p;
      bad.change_call(call, params);
      return run_rainfusion_cuda(call, params, nullptr);
    });
    EXPECT_EQ(s.code(), bad.code) << bad.what << ": " << s.message();
    EXPECT_NE(s.message().find(bad.message), std::string::npos) << bad.what << ": " << s.message();
    EXPECT_EQ(testing::check_untouched(data->problem), "") << bad.what;
  }

}

// Inputs holding NaN are not refused on the GPU (finding them would need a wait): the call runs and
// every row it writes is NaN, as dense attention's would be; nothing reads past the lists.
TEST(GpuRainfusion, NanInputsGiveNanRows) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  RainCase rc;
  rc.video = kGeometries[3];
  auto data = make_data(rc, rng);
  testing::for_each_offset(data->problem.q, [&](std::int64_t off) {
    testing::write_element(data->problem.q, off, std::numeric_limits<double>::quiet_NaN());
  });
  RainFusionParams params;
  params.sparsity = 0.5;
  RainFusionPlan plan;
  const Status s =
      run_on_gpu(*data, [&](const AttentionProblem& p) { return run_rainfusion_cuda(p, params, nullptr, &plan); });
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<double> out = out_values(data->problem);
  ASSERT_FALSE(out.empty());
  for (double v : out) ASSERT_TRUE(std::isnan(v)) << "a row of NaN inputs came out as " << v;
  // The lists stay full and in range.
  for (std::size_t r = 0; r + 1 < plan.layout.offsets.size(); ++r)
    for (std::int32_t i = plan.layout.offsets[r]; i < plan.layout.offsets[r + 1]; ++i)
      ASSERT_TRUE(plan.layout.indices[static_cast<std::size_t>(i)] >= 0 &&
                  plan.layout.indices[static_cast<std::size_t>(i)] < plan.layout.k_tiles)
          << "row " << r;
}

// The whole pass runs on the stream with no host copy: captured in a CUDA graph, a replay writes
// what a direct call writes, bit for bit.
TEST(GpuRainfusion, CapturedInACudaGraphReplaysTheDirectCall) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (std::int64_t d : {64, 128}) {
    RainCase rc;
    rc.video = kGeometries[d == 64 ? 1 : 2];
    rc.head_size = d;
    rc.heads_q = 4, rc.heads_kv = 2;
    auto data = make_data(rc, rng);
    SCOPED_TRACE(rc.name() + " (seed " + std::to_string(seed) + ")");
    RainFusionParams params;
    params.sparsity = 0.8;
    ASSERT_TRUE(run_on_gpu(*data, [&](const AttentionProblem& p) { return run_rainfusion_cuda(p, params, nullptr); })
                    .ok());
    const std::vector<double> direct = out_values(data->problem);
    testing::poison(data->problem.out);
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    const Status s = run_on_gpu(*data, [&](const AttentionProblem& p) {
      if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        return Internal("cannot begin a capture");
      const Status status = run_rainfusion_cuda(p, params, stream);
      cudaGraph_t graph = nullptr;
      if (cudaStreamEndCapture(stream, &graph) != cudaSuccess || graph == nullptr) return Internal("capture failed");
      if (!status.ok()) {
        cudaGraphDestroy(graph);
        return status;
      }
      cudaGraphExec_t exec = nullptr;
      cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
      if (e == cudaSuccess) e = cudaGraphLaunch(exec, stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      return e == cudaSuccess ? Status::Ok() : Internal(std::string("graph replay: ") + cudaGetErrorString(e));
    });
    cudaStreamDestroy(stream);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(out_values(data->problem), direct);
  }
}

#else

TEST(GpuRainfusion, CpuOnlyBuildReportsUnavailable) {
  AttentionProblem p;
  p.video = VideoGeometry{1, 8, 8};
  p.q.device.kind = DeviceKind::kCuda;
  EXPECT_EQ(run_rainfusion_cuda(p, RainFusionParams{}, nullptr).code(), ErrorCode::kUnavailable);
}

#endif

}  // namespace
}  // namespace diffattn
