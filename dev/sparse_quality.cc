// What FASTVIDEO_VSA and RAINFUSION_ATTN lose on the runner's synthetic video activations: relL2 and
// cosine of their CPU implementations against dense attention (run_sdpa_cpu) on the same bf16
// inputs, at several kept shares of the key tiles, for one latent video geometry and denoising step.
// No GPU.
//   g++ -O2 -std=c++20 -fopenmp -Iinclude -Isrc dev/sparse_quality.cc -o build/dev/sparse_quality \
//       build/default/src/libdiffattn_runner.a build/default/src/libdiffattn_kernels.a \
//       build/default/src/libdiffattn_core.a -lpthread
//   build/dev/sparse_quality FRAMES HEIGHT WIDTH [HEADS=4] [STEP=0 STEPS=1]
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "diffattn/problem.h"
#include "kernels/cpu/rainfusion_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cpu/vsa_cpu.h"
#include "kernels/sparse/rainfusion_plan.h"
#include "runner/activation_generator.h"

using namespace diffattn;
using namespace diffattn::runner;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FRAMES HEIGHT WIDTH [HEADS=4] [STEP=0 STEPS=1]\n", argv[0]);
    return 2;
  }
  const VideoGeometry g{std::atol(argv[1]), std::atol(argv[2]), std::atol(argv[3])};
  const int heads = argc > 4 ? std::atoi(argv[4]) : 4;
  const int step = argc > 5 ? std::atoi(argv[5]) : 0;
  const int steps = argc > 6 ? std::atoi(argv[6]) : 1;
  const int dim = 128;
  const std::int64_t n = g.tokens();
  const std::array<std::int64_t, 4> shape{1, n, heads, dim};
  HostTensor q(DType::kBFloat16, shape), k(DType::kBFloat16, shape), v(DType::kBFloat16, shape);
  ActivationKey key{20261203, "wan2.1-14b", "self", 3, step, steps};
  key.video = g;
  generate_activations(key, ActivationStats{}, q, k, v);
  HostTensor ref(DType::kBFloat16, shape), out(DType::kBFloat16, shape);

  AttentionProblem p;
  p.q = q.view();
  p.k = k.view();
  p.v = v.view();
  p.video = g;
  auto run = [&](HostTensor& o, auto&& fn) {
    p.out = o.view();
    const Status s = fn();
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      std::exit(1);
    }
  };
  run(ref, [&] { return run_sdpa_cpu(p); });
  auto compare = [&](const char* what, double kept) {
    double num = 0, den = 0, dot = 0, oo = 0;
    for (std::int64_t i = 0; i < ref.numel(); ++i) {
      const double a = out.get(i), b = ref.get(i);
      num += (a - b) * (a - b);
      den += b * b;
      dot += a * b;
      oo += a * a;
    }
    std::printf("| %s | %.3f | %.2f | %.4f |\n", what, kept, std::sqrt(num / den), dot / std::sqrt(den * oo));
  };
  std::printf("video %ldx%ldx%ld = %ld tokens, %d heads of %d, step %d of %d\n\n", static_cast<long>(g.frames),
              static_cast<long>(g.height), static_cast<long>(g.width), static_cast<long>(n), heads, dim, step,
              steps);
  std::printf("| backend | kept share of key tiles | relL2 | cosine |\n|---|---|---|---|\n");
  const std::int64_t cubes = ((g.frames + 3) / 4) * ((g.height + 3) / 4) * ((g.width + 3) / 4);
  for (double share : {0.5, 0.2, 0.125}) {
    const auto topk = static_cast<std::int64_t>(std::ceil(share * cubes));
    BlockSparseLayout chosen;
    run(out, [&] { return run_fastvideo_vsa_cpu(p, topk, &chosen); });
    char what[96];
    std::snprintf(what, sizeof what, "FASTVIDEO_VSA topk %ld of %ld", static_cast<long>(topk), static_cast<long>(cubes));
    compare(what, static_cast<double>(topk) / cubes);
  }
  for (double sparsity : {0.5, 0.8, 0.875}) {
    RainFusionParams params;
    params.sparsity = sparsity;
    RainFusionPlan plan;
    run(out, [&] { return run_rainfusion_cpu(p, params, &plan); });
    char what[96];
    std::snprintf(what, sizeof what, "RAINFUSION_ATTN sparsity %.3g", sparsity);
    compare(what, plan.density);
  }
}
