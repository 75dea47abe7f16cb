// How concentrated is attention on the runner's synthetic video activations? For a latent video
// geometry, sampled queries of every head get their exact softmax over all keys (float64), and the
// tool prints the share of that attention ("recall") held by
//   - the best 12.5 %, 25 % and 50 % of the 4 x 4 x 4 key cubes, chosen per query from its true
//     mass (more than any top-k selection of FASTVIDEO_VSA's cubes per query cube can keep), and
//   - a box centred on the query covering about 15 % of the video (a sliding 3D window),
// plus the effective number of keys (exp of the entropy). No GPU.
//   g++ -O2 -std=c++20 -fopenmp -Iinclude -Isrc dev/attention_recall.cc -o build/dev/attention_recall \
//       build/default/src/libdiffattn_runner.a build/default/src/libdiffattn_core.a -lpthread
//   build/dev/attention_recall FRAMES HEIGHT WIDTH [HEADS] [QUERIES_PER_HEAD] [STEP/STEPS]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "runner/activation_generator.h"

using namespace diffattn;
using namespace diffattn::runner;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FRAMES HEIGHT WIDTH [HEADS=4] [QUERIES=192] [STEP=0 STEPS=1]\n", argv[0]);
    return 2;
  }
  const VideoGeometry g{std::atol(argv[1]), std::atol(argv[2]), std::atol(argv[3])};
  const int heads = argc > 4 ? std::atoi(argv[4]) : 4;
  const int queries = argc > 5 ? std::atoi(argv[5]) : 192;
  const int step = argc > 6 ? std::atoi(argv[6]) : 0;
  const int steps = argc > 7 ? std::atoi(argv[7]) : 1;
  const int dim = 128;
  const std::int64_t n = g.tokens();
  HostTensor q(DType::kFloat32, {1, n, heads, dim}), k(DType::kFloat32, {1, n, heads, dim}),
      v(DType::kFloat32, {1, n, heads, dim});
  ActivationKey key{20261203, "wan2.1-14b", "self", 3, step, steps};
  key.video = g;
  generate_activations(key, ActivationStats{}, q, k, v);

  // Cube index of every token (4 x 4 x 4 latent cubes, partial at the edges).
  const std::int64_t cf = (g.frames + 3) / 4, ch = (g.height + 3) / 4, cw = (g.width + 3) / 4;
  const std::int64_t cubes = cf * ch * cw;
  auto coord = [&](std::int64_t t, std::int64_t& f, std::int64_t& y, std::int64_t& x) {
    f = t / (g.height * g.width);
    y = t / g.width % g.height;
    x = t % g.width;
  };
  auto cube_of = [&](std::int64_t t) {
    std::int64_t f, y, x;
    coord(t, f, y, x);
    return (f / 4 * ch + y / 4) * cw + x / 4;
  };
  // The window: the same fraction of each extent, its product about 15 % of the video.
  const double side = std::cbrt(0.155);
  const std::int64_t wf = std::max<std::int64_t>(1, std::llround(side * g.frames)),
                     wh = std::max<std::int64_t>(1, std::llround(side * g.height)),
                     ww = std::max<std::int64_t>(1, std::llround(side * g.width));
  const double window_share = static_cast<double>(wf * wh * ww) / static_cast<double>(n);

  const double fractions[3] = {0.125, 0.25, 0.5};
  std::printf("video %ldx%ldx%ld = %ld tokens, %ld cubes, %d heads x %d queries, step %d of %d\n",
              static_cast<long>(g.frames), static_cast<long>(g.height), static_cast<long>(g.width),
              static_cast<long>(n), static_cast<long>(cubes), heads, queries, step, steps);
  std::printf("head  top12.5%%cubes  top25%%  top50%%  window(%.1f%%)  eff.keys\n",
              100.0 * window_share);
  double sum[5] = {0, 0, 0, 0, 0};
  for (int h = 0; h < heads; ++h) {
    double acc[5] = {0, 0, 0, 0, 0};
    std::vector<double> local(queries * 5);
#pragma omp parallel for schedule(dynamic)
    for (int s = 0; s < queries; ++s) {
      const std::int64_t i = (static_cast<std::int64_t>(s) * 7919 + 13) % n;
      std::vector<double> logit(n);
      for (std::int64_t j = 0; j < n; ++j) {
        double d = 0.0;
        for (int e = 0; e < dim; ++e) d += q.get((i * heads + h) * dim + e) * k.get((j * heads + h) * dim + e);
        logit[j] = d / std::sqrt(static_cast<double>(dim));
      }
      const double mx = *std::max_element(logit.begin(), logit.end());
      std::vector<double> sorted = logit;
      std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.end());
      const double median = sorted[n / 2];
      double z = 0.0;
      for (double& l : logit) z += (l = std::exp(l - mx));
      std::vector<double> cube_mass(cubes, 0.0);
      double entropy = 0.0, in_window = 0.0;
      std::int64_t fi, yi, xi;
      coord(i, fi, yi, xi);
      // The window's corner, clamped so the box stays inside the video.
      const std::int64_t f0 = std::clamp<std::int64_t>(fi - wf / 2, 0, g.frames - wf),
                         y0 = std::clamp<std::int64_t>(yi - wh / 2, 0, g.height - wh),
                         x0 = std::clamp<std::int64_t>(xi - ww / 2, 0, g.width - ww);
      for (std::int64_t j = 0; j < n; ++j) {
        const double p = logit[j] / z;
        cube_mass[cube_of(j)] += p;
        if (p > 0) entropy -= p * std::log(p);
        std::int64_t f, y, x;
        coord(j, f, y, x);
        if (f >= f0 && f < f0 + wf && y >= y0 && y < y0 + wh && x >= x0 && x < x0 + ww) in_window += p;
      }
      std::sort(cube_mass.begin(), cube_mass.end(), std::greater<>());
      for (int fr = 0; fr < 3; ++fr) {
        const auto keep = static_cast<std::int64_t>(std::ceil(fractions[fr] * cubes));
        local[s * 5 + fr] = std::accumulate(cube_mass.begin(), cube_mass.begin() + keep, 0.0);
      }
      local[s * 5 + 3] = in_window;
      local[s * 5 + 4] = std::exp(entropy);
      (void)median;
      if (s == 0) std::fprintf(stderr, "  head %d query %ld: max-median logit %.2f\n", h, static_cast<long>(i), mx - median);
    }
    for (int s = 0; s < queries; ++s)
      for (int c = 0; c < 5; ++c) acc[c] += local[s * 5 + c] / queries;
    std::printf("%4d  %12.3f  %6.3f  %6.3f  %12.3f  %8.0f\n", h, acc[0], acc[1], acc[2], acc[3], acc[4]);
    for (int c = 0; c < 5; ++c) sum[c] += acc[c] / heads;
  }
  std::printf(" all  %12.3f  %6.3f  %6.3f  %12.3f  %8.0f\n", sum[0], sum[1], sum[2], sum[3], sum[4]);
}
