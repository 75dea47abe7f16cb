// SAGE_ATTN's CPU implementation beside TORCH_SDPA's CPU kernel on one bf16 self-attention
// (1 x S x 8 heads x 128), best of three calls each. No GPU.
//   g++ -O2 -std=c++20 -fopenmp -Iinclude -Isrc dev/sage_cpu_time.cc -o build/dev/sage_cpu_time \
//       build/default/src/libdiffattn_kernels.a build/default/src/libdiffattn_core.a -lpthread
//   OMP_NUM_THREADS=1 build/dev/sage_cpu_time 2048
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "diffattn/problem.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/sage_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
using namespace diffattn;
int main(int argc, char** argv) {
  const long S = argc > 1 ? atol(argv[1]) : 2048, H = 8, D = 128;
  std::vector<uint16_t> q(S * H * D), k(S * H * D), v(S * H * D), o(S * H * D);
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  for (auto* t : {&q, &k, &v}) for (auto& x : *t) x = cpu::float_to_bf16(nd(rng));
  AttentionProblem p;
  auto view = [&](std::vector<uint16_t>& b) { return TensorView::Contiguous(b.data(), DType::kBFloat16, {1, S, H, D}); };
  p.q = view(q); p.k = view(k); p.v = view(v); p.out = view(o);
  auto time = [&](auto fn) { double best = 1e9; for (int r = 0; r < 3; ++r) { auto t0 = std::chrono::steady_clock::now(); Status s = fn(); double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); if (!s.ok()) { printf("%s\n", s.ToString().c_str()); return -1.0; } best = std::min(best, t);} return best; };
  const double flops = 4.0 * H * S * S * D;
  double ts = time([&] { return run_sdpa_cpu(p); });
  double t8 = time([&] { return sage::run_sage_attn_cpu(p, sage::PvMode::kFp8); });
  double t16 = time([&] { return sage::run_sage_attn_cpu(p, sage::PvMode::kFp16); });
  printf("S=%ld sdpa %.3f s (%.1f GF/s)  sage fp8 %.3f s (%.1f GF/s, x%.2f)  fp16 %.3f s (x%.2f)\n", S, ts, flops/ts/1e9, t8, flops/t8/1e9, ts/t8, t16, ts/t16);
}
