// SAGE_ATTN's CPU kernels beside TORCH_SDPA's CPU kernel on one bf16 self-attention
// (1 x S x 8 heads x 128), best of three calls each: the tile kernel of every instruction set this
// CPU runs and the reference loops, in both P*V modes and QK16/V8. No GPU.
//   g++ -O2 -std=c++20 -fopenmp -Iinclude -Isrc dev/sage_cpu_time.cc -o build/dev/sage_cpu_time \
//       build/default/src/libdiffattn_kernels.a build/default/src/libdiffattn_core.a -lpthread
//   OMP_NUM_THREADS=1 build/dev/sage_cpu_time 2048 [ISA [MODE]]   (only that kernel and mode, e.g.
//   avx512 int8/fp8, for a profiler; the reference loops are "reference")
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "diffattn/problem.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/sage_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"

using namespace diffattn;

int main(int argc, char** argv) {
  const long s = argc > 1 ? std::atol(argv[1]) : 2048, heads = 8, d = 128;
  std::vector<std::uint16_t> q(s * heads * d), k(s * heads * d), v(s * heads * d), o(s * heads * d);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto* t : {&q, &k, &v})
    for (auto& x : *t) x = cpu::float_to_bf16(normal(rng));
  AttentionProblem p;
  auto view = [&](std::vector<std::uint16_t>& b) {
    return TensorView::Contiguous(b.data(), DType::kBFloat16, {1, s, heads, d});
  };
  p.q = view(q), p.k = view(k), p.v = view(v), p.out = view(o);
  auto best_of_three = [&](auto fn) {
    double best = 1e9;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const Status st = fn();
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!st.ok()) {
        std::printf("%s\n", st.ToString().c_str());
        return -1.0;
      }
      best = std::min(best, t);
    }
    return best;
  };
  const std::string only_isa = argc > 2 ? argv[2] : "", only_mode = argc > 3 ? argv[3] : "";
  const double flops = 4.0 * heads * s * s * d;
  const double sdpa = only_isa.empty() ? best_of_three([&] { return run_sdpa_cpu(p); }) : 1.0;
  std::printf("S=%ld  TORCH_SDPA %.3f s (%.1f GF/s)\n", s, sdpa, flops / sdpa / 1e9);
  struct Mode {
    const char* name;
    sage::PvMode pv;
    sage::QkMode qk;
  };
  const Mode modes[] = {{"int8/fp8", sage::PvMode::kFp8, sage::QkMode::kInt8},
                        {"int8/fp16", sage::PvMode::kFp16, sage::QkMode::kInt8},
                        {"qk16/fp8", sage::PvMode::kFp8, sage::QkMode::k16}};
  for (const Mode& m : modes) {
    if (!only_mode.empty() && only_mode != m.name) continue;
    std::string line = std::string(m.name) + ":";
    if (!only_isa.empty() && only_isa != "reference") {
      const auto isa = parse_cpu_isa(only_isa);
      if (!isa) return 2;
      const double t = best_of_three([&] { return sage::run_sage_attn_cpu(p, m.pv, m.qk, {false, *isa}); });
      std::printf("%s %s %.3f s\n", m.name, only_isa.c_str(), t);
      continue;
    }
    const double ref = best_of_three([&] { return sage::run_sage_attn_cpu(p, m.pv, m.qk, {true, std::nullopt}); });
    line += "  reference " + std::to_string(ref).substr(0, 5) + " s (x" + std::to_string(sdpa / ref).substr(0, 4) + ")";
    for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      if (!cpu_isa_available(isa)) continue;
      const double t = best_of_three([&] { return sage::run_sage_attn_cpu(p, m.pv, m.qk, {false, isa}); });
      line += "  " + std::string(cpu_isa_name(isa)) + " " + std::to_string(t).substr(0, 5) + " s (x" +
              std::to_string(sdpa / t).substr(0, 4) + ")";
    }
    std::printf("%s   (x: TORCH_SDPA's time over this one)\n", line.c_str());
  }
}
