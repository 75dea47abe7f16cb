// FASTVIDEO_VSA's CUDA path against the CPU: given the GPU's own key-cube lists, its output is the
// CPU block-sparse kernel's fine branch plus the float64 coarse branch times the gate; its lists
// are the CPU's top-k (float32 scores may order near-ties differently); with every cube kept it is
// dense attention; and its refusals write nothing. Strided and misaligned views take the kernels'
// element-wise paths. The backend through the layer, CUDA graph replay included, is the GPU parity
// harness's (tests/parity/gpu_parity_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cpu/view_access.h"
#include "kernels/cpu/vsa_cpu.h"
#include "kernels/cuda/sparse/vsa_cuda.h"
#include "kernels/sparse/vsa_cubes.h"
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
  if (!hopper_present()) GTEST_SKIP() << "no sm_90 device here: FASTVIDEO_VSA's CUDA path is Hopper's"


struct VsaCase {
  VideoGeometry video;
  DType dtype = DType::kBFloat16;
  std::int64_t head_size = 64, heads_q = 2, heads_kv = 2, batch = 1;
  bool gate = false;
  testing::Layout layout = testing::Layout::kContiguous;
  bool misaligned = false;  // q and the gate start one element past 16 bytes: element-wise kernels

  std::string name() const {
    return std::string(dtype_name(dtype)) + "_d" + std::to_string(head_size) + "_h" + std::to_string(heads_q) + "x" +
           std::to_string(heads_kv) + "_b" + std::to_string(batch) + "_video" + std::to_string(video.frames) + "x" +
           std::to_string(video.height) + "x" + std::to_string(video.width) + (gate ? "_gate" : "") +
           (misaligned ? "_misaligned" : "");
  }
};

using testing::misaligned_copy;

// A contiguous [B, S, Hq, Dv] buffer shaped like out, poisoned.
TensorView fresh_out(testing::CaseData& data) {
  const TensorView& out = data.problem.out;
  testing::HostBuffer& buf = data.add(out.dtype, out.numel());
  TensorView copy = TensorView::Contiguous(buf.data(), out.dtype, {out.size(0), out.size(1), out.size(2), out.size(3)});
  testing::poison(copy);
  return copy;
}

std::unique_ptr<testing::CaseData> make_data(const VsaCase& vc, std::mt19937_64& rng, bool lse = false) {
  testing::ParityCase c;
  c.dtype = vc.dtype;
  c.video = vc.video;
  c.seq_q = c.seq_kv = vc.video.tokens();
  c.batch = vc.batch;
  c.heads_q = vc.heads_q, c.heads_kv = vc.heads_kv;
  c.head_size = c.head_size_v = vc.head_size;
  c.layout = vc.layout;
  c.lse = lse;
  auto data = testing::make_case_data(c, rng);
  AttentionProblem& p = data->problem;
  if (vc.gate) {
    testing::HostBuffer& buf = data->add(p.out.dtype, p.out.numel());
    TensorView gate = TensorView::Contiguous(buf.data(), p.out.dtype,
                                             {p.out.size(0), p.out.size(1), p.out.size(2), p.out.size(3)});
    testing::fill_normal(gate, rng, 0.5);
    p.gate = vc.misaligned ? misaligned_copy(*data, gate) : gate;
  }
  if (vc.misaligned) p.q = misaligned_copy(*data, p.q);
  return data;
}

struct GpuRun {
  std::unique_ptr<testing::CaseData> data;  // host views; out holds what the GPU wrote
  BlockSparseLayout selected;
};

Result<GpuRun> run_on_gpu(std::unique_ptr<testing::CaseData> data, std::int64_t topk,
                          flash::BlockSparseKernel kernel = flash::BlockSparseKernel::kForDevice,
                          std::int64_t coarse_score_bytes = 0) {
  GpuRun run;
  {
    testing::DeviceCase device(*data);
    if (!device.ok()) return Internal("could not copy the case to the GPU");
    DIFFATTN_RETURN_IF_ERROR(run_fastvideo_vsa_cuda(device.problem(), topk, nullptr, &run.selected, kernel,
                                                            coarse_score_bytes));
    if (!device.copy_back()) return Internal("could not copy the outputs back");
  }
  run.data = std::move(data);
  return run;
}

// What the GPU should write for host problem `p` when its fine branch keeps `lists`: the CPU
// block-sparse kernel over the inputs in cube order, plus, with a gate, the coarse branch from
// float64 cube means times the gate. [B, S, Hq, D] row-major.
Result<std::vector<double>> expected_output(const AttentionProblem& p, const BlockSparseLayout& lists) {
  const VsaCubes cubes = tile_video_into_cubes(*p.video);
  const std::int64_t batch = p.q.size(0), tokens = p.q.size(1), hq = p.q.size(2), hkv = p.k.size(2);
  const std::int64_t d = p.q.size(3), count = cubes.count(), padded = cubes.padded_length();
  std::vector<float> q = cpu::gather_into_slots(p.q, cubes.slot, padded);
  std::vector<float> k = cpu::gather_into_slots(p.k, cubes.slot, padded);
  std::vector<float> v = cpu::gather_into_slots(p.v, cubes.slot, padded);
  std::vector<float> fine_out(static_cast<std::size_t>(batch * padded * hq * d), 0.f);
  AttentionProblem fine;
  fine.q = TensorView::Contiguous(q.data(), DType::kFloat32, {batch, padded, hq, d});
  fine.k = TensorView::Contiguous(k.data(), DType::kFloat32, {batch, padded, hkv, d});
  fine.v = TensorView::Contiguous(v.data(), DType::kFloat32, {batch, padded, hkv, d});
  fine.out = TensorView::Contiguous(fine_out.data(), DType::kFloat32, {batch, padded, hq, d});
  fine.scale = p.softmax_scale();
  DIFFATTN_RETURN_IF_ERROR(run_block_sparse_cpu(fine, lists));

  std::vector<double> coarse;
  if (p.gate) {
    const auto qm = cpu::tile_means(q, cubes.valid, count, kVsaCubeTokens, count, batch, hq * d);
    const auto km = cpu::tile_means(k, cubes.valid, count, kVsaCubeTokens, count, batch, hkv * d);
    const auto vm = cpu::tile_means(v, cubes.valid, count, kVsaCubeTokens, count, batch, hkv * d);
    coarse.assign(static_cast<std::size_t>(batch * count * hq * d), 0.0);
    std::vector<double> s(static_cast<std::size_t>(count));
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t h = 0; h < hq; ++h)
        for (std::int64_t c = 0; c < count; ++c) {
          const std::int64_t hk = h / (hq / hkv);
          for (std::int64_t j = 0; j < count; ++j) {
            double dot = 0.0;
            for (std::int64_t e = 0; e < d; ++e)
              dot += qm[((b * count + c) * hq + h) * d + e] * km[((b * count + j) * hkv + hk) * d + e];
            s[j] = dot * p.softmax_scale();
          }
          const double m = *std::max_element(s.begin(), s.end());
          double sum = 0.0;
          for (double& x : s) sum += (x = std::exp(x - m));
          for (std::int64_t j = 0; j < count; ++j)
            for (std::int64_t e = 0; e < d; ++e)
              coarse[((b * count + c) * hq + h) * d + e] += s[j] / sum * vm[((b * count + j) * hkv + hk) * d + e];
        }
  }
  std::vector<double> want(static_cast<std::size_t>(batch * tokens * hq * d));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < tokens; ++i) {
      const std::int64_t slot = cubes.slot[static_cast<std::size_t>(i)], cube = slot / kVsaCubeTokens;
      for (std::int64_t h = 0; h < hq; ++h)
        for (std::int64_t e = 0; e < d; ++e) {
          double value = fine_out[((b * padded + slot) * hq + h) * d + e];
          if (p.gate)
            value += coarse[((b * count + cube) * hq + h) * d + e] *
                     testing::read_element(*p.gate, testing::element_offset(*p.gate, {b, i, h, e}));
          want[((b * tokens + i) * hq + h) * d + e] = value;
        }
    }
  return want;
}

// Empty when the largest error of `out` against `want` is within `tolerance` of want's largest
// magnitude (and nothing is NaN), else the worst element.
std::string compare(const TensorView& out, const std::vector<double>& want, double tolerance) {
  double worst = 0.0, scale = 0.0;
  std::string where;
  std::size_t at = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (std::int64_t b = 0; b < out.size(0); ++b)
    for (std::int64_t i = 0; i < out.size(1); ++i)
      for (std::int64_t h = 0; h < out.size(2); ++h)
        for (std::int64_t e = 0; e < out.size(3); ++e, ++at) {
          const double got = testing::read_element(out, testing::element_offset(out, {b, i, h, e}));
          const double error = std::isnan(got) ? INFINITY : std::fabs(got - want[at]);
          if (error > worst) {
            worst = error;
            where = "out[" + std::to_string(b) + "," + std::to_string(i) + "," + std::to_string(h) + "," +
                    std::to_string(e) + "] = " + std::to_string(got) + ", want " + std::to_string(want[at]);
          }
        }
  if (worst <= tolerance * std::max(scale, 1e-6)) return "";
  return where + " (error " + std::to_string(worst / std::max(scale, 1e-6)) + " of the largest magnitude " +
         std::to_string(scale) + ")";
}

double tolerance(DType dtype) { return dtype == DType::kBFloat16 ? 2e-2 : 6e-3; }

// Small videos with partial cubes and whole ones, both half types, both head sizes, GQA, gates,
// strided and misaligned views.
std::vector<VsaCase> small_cases() {
  const VideoGeometry videos[] = {{5, 6, 7}, {8, 8, 8}, {9, 13, 18}};
  std::vector<VsaCase> cases;
  int idx = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (std::int64_t d : {64, 128})
      for (const VideoGeometry& video : videos) {
        VsaCase vc;
        vc.video = video;
        vc.dtype = dtype;
        vc.head_size = d;
        vc.heads_q = idx % 2 ? 4 : 2;
        vc.heads_kv = 2;
        vc.batch = idx % 3 == 2 ? 2 : 1;
        vc.gate = idx % 4 != 3;
        const testing::Layout layouts[] = {testing::Layout::kContiguous, testing::Layout::kHeadMajor,
                                           testing::Layout::kPaddedRows};
        vc.layout = layouts[idx % 3];
        vc.misaligned = idx % 5 == 4;
        cases.push_back(vc);
        ++idx;
      }
  return cases;
}

void check_branches_on_own_cubes(flash::BlockSparseKernel kernel) {
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int idx = 0;
  for (const VsaCase& vc : small_cases()) {
    const std::int64_t cubes = tile_video_into_cubes(vc.video).count();
    const std::int64_t topk = vsa_topk_for_sparsity(idx++ % 2 ? 0.5 : 0.75, cubes);
    auto run = run_on_gpu(make_data(vc, rng), topk, kernel);
    ASSERT_TRUE(run.ok()) << vc.name() << ": " << run.status().message();
    const BlockSparseLayout& lists = run->selected;
    EXPECT_EQ(lists.q_tile, 64);
    EXPECT_EQ(lists.k_tile, 64);
    EXPECT_EQ(lists.tile_rows, tile_video_into_cubes(vc.video).valid);
    const AttentionProblem& p = run->data->problem;
    auto want = expected_output(p, lists);  // also checks the lists (check_block_sparse_layout)
    ASSERT_TRUE(want.ok()) << vc.name() << ": " << want.status().message();
    EXPECT_EQ(compare(p.out, *want, tolerance(vc.dtype)), "")
        << vc.name() << " topk " << topk << " (seed " << seed << ")";
  }
}

TEST(GpuVsa, MatchesTheCpuBranchesOnItsOwnKeyCubes) {
  SKIP_WITHOUT_HOPPER();
  check_branches_on_own_cubes(flash::BlockSparseKernel::kForDevice);
}

// The fine branch on the mma.sync walk, the kernel Ampere and Ada run (compute_80 code here).
TEST(GpuVsa, AmpereWalkMatchesTheCpuBranchesOnItsOwnKeyCubes) {
  if (!testing::sm80_or_newer_present()) GTEST_SKIP() << "no sm_80 or newer device here for the mma.sync walk";
  check_branches_on_own_cubes(flash::BlockSparseKernel::kAmpere);
}

TEST(GpuVsa, PicksTheKeyCubesTheCpuPicks) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const VsaCase& vc : small_cases()) {
    const std::int64_t topk = vsa_topk_for_sparsity(0.6, tile_video_into_cubes(vc.video).count());
    auto run = run_on_gpu(make_data(vc, rng), topk);
    ASSERT_TRUE(run.ok()) << vc.name() << ": " << run.status().message();
    AttentionProblem host = run->data->problem;
    host.out = fresh_out(*run->data);
    BlockSparseLayout cpu_lists;
    ASSERT_TRUE(run_fastvideo_vsa_cpu(host, topk, &cpu_lists).ok()) << vc.name();
    const BlockSparseLayout& gpu_lists = run->selected;
    ASSERT_EQ(gpu_lists.offsets, cpu_lists.offsets) << vc.name();
    ASSERT_EQ(gpu_lists.indices.size(), cpu_lists.indices.size()) << vc.name();
    std::int64_t agree = 0;
    for (std::size_t r = 0; r + 1 < cpu_lists.offsets.size(); ++r) {
      const auto begin = static_cast<std::size_t>(cpu_lists.offsets[r]);
      const auto end = static_cast<std::size_t>(cpu_lists.offsets[r + 1]);
      ASSERT_TRUE(std::is_sorted(gpu_lists.indices.begin() + begin, gpu_lists.indices.begin() + end)) << vc.name();
      std::vector<std::int32_t> common;
      std::set_intersection(gpu_lists.indices.begin() + begin, gpu_lists.indices.begin() + end,
                            cpu_lists.indices.begin() + begin, cpu_lists.indices.begin() + end,
                            std::back_inserter(common));
      agree += static_cast<std::int64_t>(common.size());
    }
    EXPECT_GE(static_cast<double>(agree), 0.99 * static_cast<double>(cpu_lists.indices.size()))
        << vc.name() << ": " << agree << " of " << cpu_lists.indices.size() << " entries agree (seed " << seed << ")";
  }
}

// The coarse branch runs its heads in passes that keep their scores within a bound: a pass per
// head computes every head as one pass over all of them does, to the bit.
TEST(GpuVsa, CoarsePassesOfOneHeadGiveTheSameResult) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const VsaCase& vc : small_cases()) {
    if (!vc.gate || vc.batch * vc.heads_q < 3) continue;  // gated, several passes
    const std::int64_t topk = vsa_topk_for_sparsity(0.6, tile_video_into_cubes(vc.video).count());
    std::mt19937_64 same = rng;  // the same inputs twice
    auto one_pass = run_on_gpu(make_data(vc, rng), topk);
    auto per_head = run_on_gpu(make_data(vc, same), topk, flash::BlockSparseKernel::kForDevice, 1);
    ASSERT_TRUE(one_pass.ok() && per_head.ok()) << vc.name();
    EXPECT_EQ(per_head->selected.indices, one_pass->selected.indices) << vc.name() << " (seed " << seed << ")";
    std::vector<double> want;
    testing::for_each_offset(one_pass->data->problem.out, [&](std::int64_t off) {
      want.push_back(testing::read_element(one_pass->data->problem.out, off));
    });
    EXPECT_EQ(compare(per_head->data->problem.out, want, 0.0), "") << vc.name() << " (seed " << seed << ")";
  }
}

TEST(GpuVsa, KeepingEveryCubeIsDenseAttention) {
  SKIP_WITHOUT_HOPPER();
  const auto seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (VsaCase vc : small_cases()) {
    vc.gate = false;  // the gated coarse branch is VSA's own addition to dense attention
    auto run = run_on_gpu(make_data(vc, rng), tile_video_into_cubes(vc.video).count());
    ASSERT_TRUE(run.ok()) << vc.name() << ": " << run.status().message();
    AttentionProblem dense = run->data->problem;
    dense.video.reset();
    dense.out = fresh_out(*run->data);
    ASSERT_TRUE(run_sdpa_cpu(dense).ok()) << vc.name();
    std::vector<double> want;
    testing::for_each_offset(dense.out,
                             [&](std::int64_t off) { want.push_back(testing::read_element(dense.out, off)); });
    EXPECT_EQ(compare(run->data->problem.out, want, tolerance(vc.dtype)), "") << vc.name() << " (seed " << seed << ")";
  }
}

// Runs `call` (a variant of `data`'s problem on the device) and expects `code` with out (and lse)
// left as poisoned.
std::string expect_refused(testing::CaseData& data, const std::function<void(AttentionProblem&)>& change,
                           std::int64_t topk, ErrorCode code, const std::string& message_part) {
  testing::DeviceCase device(data);
  if (!device.ok()) return "could not copy the case to the GPU";
  AttentionProblem call = device.problem();
  change(call);
  const Status s = run_fastvideo_vsa_cuda(call, topk, nullptr);
  if (s.code() != code) return "expected code " + std::to_string(static_cast<int>(code)) + ", got: " + s.ToString();
  if (s.message().find(message_part) == std::string::npos)
    return "the message lacks '" + message_part + "': " + s.message();
  if (!device.copy_back()) return "could not copy the outputs back";
  return testing::check_untouched(data.problem);
}

TEST(GpuVsa, RefusalsNameTheFixAndWriteNothing) {
  SKIP_WITHOUT_HOPPER();
  std::mt19937_64 rng(fresh_seed());
  VsaCase vc;
  vc.video = {5, 6, 7};  // 8 cubes
  vc.gate = true;
  const auto same = [](AttentionProblem&) {};
  const auto no_lse = [](AttentionProblem& p) { p.lse.reset(); };
  auto data = make_data(vc, rng, /*lse=*/true);
  EXPECT_EQ(expect_refused(*data, no_lse, 0, ErrorCode::kInvalidInput, "choose a topk in 1..8"), "");
  EXPECT_EQ(expect_refused(*data, no_lse, 9, ErrorCode::kInvalidInput, "choose a topk in 1..8"), "");
  const auto with_text = [](AttentionProblem& p) {
    p.lse.reset();
    p.video->text_before = 3;
  };
  const auto without_video = [](AttentionProblem& p) {
    p.lse.reset();
    p.video.reset();
  };
  EXPECT_EQ(expect_refused(*data, with_text, 4, ErrorCode::kUnsupported, "3 text tokens"), "");
  EXPECT_EQ(expect_refused(*data, same, 4, ErrorCode::kUnsupported, "no mask, cu_seqlens, causal flag or lse"), "");
  EXPECT_EQ(expect_refused(*data, without_video, 4, ErrorCode::kInvalidInput, "video geometry"), "");
  vc.dtype = DType::kFloat32;
  EXPECT_EQ(expect_refused(*make_data(vc, rng), same, 4, ErrorCode::kUnsupported, "float16 or bfloat16"), "");
  vc.dtype = DType::kBFloat16;
  vc.head_size = 96;
  EXPECT_EQ(expect_refused(*make_data(vc, rng), same, 4, ErrorCode::kUnsupported, "compiled: 64, 128"), "");
}

#endif  // DIFFATTN_HAVE_CUDA

}  // namespace
}  // namespace diffattn
