// SAGE_ATTN's Hopper and Ampere kernels (and FLASHINFER_ATTN's QK16/V8 kernel, which shares the Hopper
// one) beside FLASH_ATTN's on the workloads of bench/workloads.csv: best-of-N times (quantization
// included), TFLOP/s, and the difference from FLASH_ATTN's output (relative L2, cosine). A
// development probe; the product's benchmark is bench/gpu_attention_bench.cu.
//   sage_time [workload-substrings] [rounds] [modes, e.g. fp8/3,qk16/3,fp8/3p4: only those, no Ampere rows]
// SAGE_WORKLOADS=FILE reads the workloads from FILE (bench/workloads.csv's columns) instead, e.g.
// dev/sage_sweep.csv, whose key lengths separate a tile's fixed cost from its per-block cost.
// SAGE_INPUTS=normal draws q, k and v from the standard normal (the product benchmark's inputs) instead.
// Build on the GPU machine after the default preset (see dev/README.md).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/cuda/sage/run_sage_attn.h"
#include "kernels/cuda/sage/sage_hopper_launch.cuh"

using namespace diffattn;

// The three-group kernel with every kPoly-th exponential on the FMA pipe (the built-in ones have
// none), bf16, either head size: INT8 Q K^T with either P*V mode, or QK16/V8.
template <int kD, bool kPvFp8, bool kQk16, int kPoly>
static Status sage_poly(const AttentionProblem& p) {
  return sage::run_sage_attn_cuda_with(
      p, kPvFp8 ? sage::PvMode::kFp8 : sage::PvMode::kFp16, nullptr, 3,
      [](const sage::SageParams& params, int sms, void* s) {
        return sage::launch_sage_hopper<sage::SageTraits<kD, true, kPvFp8, 3, kQk16, kPoly>>(
            params, sms, static_cast<cudaStream_t>(s));
      },
      kQk16 ? sage::QkMode::k16 : sage::QkMode::kInt8);
}

template <bool kPvFp8, bool kQk16, int kPoly>
static Status sage_poly_d(const AttentionProblem& p) {
  return p.q.shape[3] == 64 ? sage_poly<64, kPvFp8, kQk16, kPoly>(p) : sage_poly<128, kPvFp8, kQk16, kPoly>(p);
}

struct Work {
  std::string name;
  long b, h, sq, skv, d;
};

static std::vector<Work> read_workloads(const char* path) {
  std::vector<Work> w;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("name", 0) == 0) continue;
    std::stringstream ss(line);
    Work x;
    std::string f;
    std::getline(ss, x.name, ',');
    std::getline(ss, f, ','), x.b = std::stol(f);
    std::getline(ss, f, ','), x.h = std::stol(f);
    std::getline(ss, f, ','), x.sq = std::stol(f);
    std::getline(ss, f, ','), x.skv = std::stol(f);
    std::getline(ss, f, ','), x.d = std::stol(f);
    w.push_back(x);
  }
  return w;
}

static TensorView view(void* p, long b, long s, long h, long d) {
  return TensorView::Contiguous(p, DType::kBFloat16, {b, s, h, d}, Device{DeviceKind::kCuda, 0});
}

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : "";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string mode_filter = argc > 3 ? argv[3] : "";
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  // Each mode at two and three consumer warpgroups (sage_config.h's rule picks one of them).
  struct Mode {
    const char* name;
    sage::PvMode pv;
    int groups;
    bool qk16;
    int poly = 0;  // > 0: sage_poly_d with every poly-th exponential on the FMA pipe
    int fuse_q = -1;  // SageKernelChoice::fuse_q
    bool quant_only = false;  // the quantization passes alone (no attention kernel; its output is not written)
  };
  const Mode all_modes[] = {{"fp8/2", sage::PvMode::kFp8, 2, false},   {"fp8/3", sage::PvMode::kFp8, 3, false},
                            {"fp16/2", sage::PvMode::kFp16, 2, false}, {"fp16/3", sage::PvMode::kFp16, 3, false},
                            {"qk16/2", sage::PvMode::kFp8, 2, true},   {"qk16/3", sage::PvMode::kFp8, 3, true},
                            {"qk16/3p4", sage::PvMode::kFp8, 3, true, 4}, {"qk16/3p8", sage::PvMode::kFp8, 3, true, 8},
                            {"fp8/3p2", sage::PvMode::kFp8, 3, false, 2}, {"fp8/3p4", sage::PvMode::kFp8, 3, false, 4},
                            {"fp8/3p8", sage::PvMode::kFp8, 3, false, 8}, {"fp16/3p4", sage::PvMode::kFp16, 3, false, 4},
                            // Four consumer groups: hd64 with FP8 P V only (sage_four_groups_fit).
                            {"fp8/4", sage::PvMode::kFp8, 4, false}, {"qk16/4", sage::PvMode::kFp8, 4, true},
                            // The Q pass (q) or the kernel's own quantization of Q (f), not sage_fuse_q's rule.
                            {"fp8/3q", sage::PvMode::kFp8, 3, false, 0, 0},
                            {"fp8/3f", sage::PvMode::kFp8, 3, false, 0, 1},
                            // The quantization passes alone: with the Q pass, without it (where the rule
                            // lets the kernel quantize Q), and QK16/V8's (V only).
                            {"quant/q", sage::PvMode::kFp8, 3, false, 0, 0, true},
                            {"quant/f", sage::PvMode::kFp8, 3, false, 0, 1, true},
                            {"quant/16", sage::PvMode::kFp8, 3, true, 0, -1, true}};
  std::vector<Mode> modes;
  for (const Mode& m : all_modes)
    if (mode_filter.empty() ? !m.qk16 && m.poly == 0 && m.groups < 4 : ("," + mode_filter + ",").find("," + std::string(m.name) + ",") != std::string::npos)
      modes.push_back(m);
  std::printf("%-28s %9s", "workload", "flash ms");
  for (const auto& m : modes) std::printf(" | %6s ms  x flash  TFLOP/s relL2    cosine  ", m.name);
  std::printf("\n");
  const char* csv = std::getenv("SAGE_WORKLOADS");
  const char* inputs = std::getenv("SAGE_INPUTS");  // "normal": standard normal q, k and v
  const bool normal = inputs != nullptr && std::string(inputs) == "normal";
  for (const Work& w : read_workloads(csv != nullptr && *csv ? csv : "bench/workloads.csv")) {
    bool wanted = !*only;
    std::stringstream names(only);
    for (std::string part; std::getline(names, part, ',');) wanted = wanted || (!part.empty() && w.name.find(part) != std::string::npos);
    if (!wanted) continue;
    if (w.d != 64 && w.d != 128) continue;
    const size_t nq = size_t(w.b) * w.sq * w.h * w.d, nk = size_t(w.b) * w.skv * w.h * w.d;
    std::vector<__nv_bfloat16> hq(nq), hk(nk), hv(nk);
    // DiT-like: keys share a per-channel offset, a few channels of q and k carry outliers
    // (`normal`: none of either).
    std::vector<float> koff(w.d);
    for (auto& x : koff) x = normal ? 0.f : 2.f * nd(rng);
    const float outlier = normal ? 1.f : 6.f;
    for (size_t i = 0; i < nq; ++i) hq[i] = __float2bfloat16(nd(rng) * ((i % w.d) < 4 ? outlier : 1.f));
    for (size_t i = 0; i < nk; ++i) hk[i] = __float2bfloat16(nd(rng) * ((i % w.d) < 4 ? outlier : 1.f) + koff[i % w.d]);
    for (size_t i = 0; i < nk; ++i) hv[i] = __float2bfloat16(nd(rng));
    void *q, *k, *v, *o_ref, *o;
    cudaMalloc(&q, nq * 2), cudaMalloc(&k, nk * 2), cudaMalloc(&v, nk * 2), cudaMalloc(&o_ref, nq * 2), cudaMalloc(&o, nq * 2);
    cudaMemcpy(q, hq.data(), nq * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(k, hk.data(), nk * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(v, hv.data(), nk * 2, cudaMemcpyHostToDevice);
    AttentionProblem p;
    p.q = view(q, w.b, w.sq, w.h, w.d), p.k = view(k, w.b, w.skv, w.h, w.d), p.v = view(v, w.b, w.skv, w.h, w.d);
    p.out = view(o_ref, w.b, w.sq, w.h, w.d);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    auto time = [&](auto&& fn) {
      float best = 1e30f;
      for (int r = 0; r < rounds; ++r) {
        cudaEventRecord(e0);
        Status s = fn();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        if (!s.ok()) {
          std::printf("  %s: %s\n", w.name.c_str(), s.ToString().c_str());
          return -1.f;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        best = std::min(best, ms);
      }
      return best;
    };
    const float t_flash = time([&] { return flash::run_flash_attn_cuda(p, nullptr); });
    std::vector<__nv_bfloat16> ref(nq), got(nq);
    cudaMemcpy(ref.data(), o_ref, nq * 2, cudaMemcpyDeviceToHost);
    AttentionProblem ps = p;
    ps.out = view(o, w.b, w.sq, w.h, w.d);
    const double flops = 4.0 * w.b * w.h * w.sq * w.skv * w.d;
    std::printf("%-28s %9.3f", w.name.c_str(), t_flash);
    for (const auto& m : modes) {
      cudaMemset(o, 0xff, nq * 2);  // NaN: an unwritten element shows
      const float t = time([&] {
        const bool fp8 = m.pv == sage::PvMode::kFp8;
        if (m.quant_only)
          return sage::run_sage_attn_cuda_with(
              ps, m.pv, nullptr, m.groups, [](const sage::SageParams&, int, void*) { return Status::Ok(); },
              m.qk16 ? sage::QkMode::k16 : sage::QkMode::kInt8, m.fuse_q);
        if (m.qk16 && m.poly == 4) return sage_poly_d<true, true, 4>(ps);
        if (m.qk16 && m.poly == 8) return sage_poly_d<true, true, 8>(ps);
        if (fp8 && m.poly == 2) return sage_poly_d<true, false, 2>(ps);
        if (fp8 && m.poly == 4) return sage_poly_d<true, false, 4>(ps);
        if (fp8 && m.poly == 8) return sage_poly_d<true, false, 8>(ps);
        if (!fp8 && m.poly == 4) return sage_poly_d<false, false, 4>(ps);
        return m.qk16 ? sage::run_qk16_v8_cuda(ps, nullptr, sage::SageKernelChoice{m.groups})
                      : sage::run_sage_attn_cuda(ps, m.pv, nullptr, sage::SageKernelChoice{m.groups, m.fuse_q});
      });
      cudaMemcpy(got.data(), o, nq * 2, cudaMemcpyDeviceToHost);
      double dd = 0, rr = 0, gg = 0, dot = 0;
      for (size_t i = 0; i < nq; i += 7) {
        const double a = __bfloat162float(got[i]), b = __bfloat162float(ref[i]);
        dd += (a - b) * (a - b), rr += b * b, gg += a * a, dot += a * b;
      }
      std::printf(" | %9.3f %8.3f %8.1f %8.2e %9.6f", t, t_flash / t, flops / t / 1e9, std::sqrt(dd / rr),
                  dot / std::sqrt(rr * gg));
    }
    // The Ampere/Ada kernels (run here on the Hopper GPU): SAGE_ATTN's (16-bit P*V, then FP8 P*V)
    // against FLASH_ATTN's, all against the Hopper FLASH_ATTN output.
    if (mode_filter.empty()) {
      AttentionProblem pa = p;
      pa.out = view(o, w.b, w.sq, w.h, w.d);
      // One kernel's time on a poisoned output, and its relL2 against the Hopper FLASH_ATTN output.
      auto timed = [&](auto&& run, double& rel) {
        cudaMemset(o, 0xff, nq * 2);
        const float t = time(run);
        cudaMemcpy(got.data(), o, nq * 2, cudaMemcpyDeviceToHost);
        double dd = 0, rr = 0;
        for (size_t i = 0; i < nq; i += 7) {
          const double a = __bfloat162float(got[i]), b = __bfloat162float(ref[i]);
          dd += (a - b) * (a - b), rr += b * b;
        }
        rel = std::sqrt(dd / rr);
        return t;
      };
      double rel = 0;
      const float t_fa = timed([&] { return flash::run_flash_attn_ampere_cuda(pa, nullptr); }, rel);
      const float t_sa = timed([&] { return sage::run_sage_attn_ampere_cuda(pa, nullptr); }, rel);
      std::printf(" | sm80 flash %8.3f sage %8.3f x %6.3f relL2 %8.2e", t_fa, t_sa, t_fa / t_sa, rel);
      // The same kernel's FP8 P*V mode (Ada's, compute_89 code; here its sm_90a build).
      const float t_s8 = timed([&] { return sage::run_sage_attn_ampere_cuda(pa, nullptr, sage::PvMode::kFp8); }, rel);
      std::printf(" | ada-fp8 sage %8.3f x %6.3f relL2 %8.2e", t_s8, t_fa / t_s8, rel);
      // FLASHINFER_ATTN's QK16/V8 on the same kernel ('fa2').
      sage::SageKernelChoice mma;
      mma.mma_sync = true;
      const float t_q8 = timed([&] { return sage::run_qk16_v8_cuda(pa, nullptr, mma); }, rel);
      std::printf(" | ada-qk16 %8.3f x %6.3f relL2 %8.2e", t_q8, t_fa / t_q8, rel);
    }
    std::printf("\n");
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o_ref), cudaFree(o);
  }
  return 0;
}
