// CPU block-sparse and FASTVIDEO_VSA benchmark: the time of dense attention (run_sdpa_cpu), of
// block-sparse attention over 64x64 tiles at several densities (the same key-tile count for every
// query tile, chosen at random), and of FASTVIDEO_VSA end to end (cube reorder, coarse branch,
// top-k, fine branch) at the top-k of the same densities, on one latent video. Prints Markdown.
//
//   cpu_sparse_bench [--video 8x16x16] [--heads 4] [--dim 64] [--reps 3]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>


#include "diffattn/problem.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cpu/vsa_cpu.h"
#include "kernels/sparse/block_sparse_layout.h"
#include "kernels/sparse/vsa_cubes.h"

namespace {

using namespace diffattn;
using Clock = std::chrono::steady_clock;

template <class Fn>
double best_seconds(int reps, Fn&& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    const Status s = fn();
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      std::exit(1);
    }
    best = std::min(best, t);
  }
  return best;
}

// Every query tile keeps `keep` key tiles drawn at random (ascending).
BlockSparseLayout random_layout(std::int64_t heads, std::int64_t tokens, std::int64_t keep, std::mt19937_64& rng) {
  BlockSparseLayout layout = full_block_sparse_layout(1, heads, tokens, tokens, 64, 64);
  layout.indices.clear();
  std::vector<std::int32_t> all(static_cast<std::size_t>(layout.k_tiles));
  std::iota(all.begin(), all.end(), 0);
  for (std::size_t r = 0; r + 1 < layout.offsets.size(); ++r) {
    layout.offsets[r] = static_cast<std::int32_t>(layout.indices.size());
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<std::int32_t> row(all.begin(), all.begin() + keep);
    std::sort(row.begin(), row.end());
    layout.indices.insert(layout.indices.end(), row.begin(), row.end());
  }
  layout.offsets.back() = static_cast<std::int32_t>(layout.indices.size());
  return layout;
}

}  // namespace

int main(int argc, char** argv) {
  VideoGeometry video{8, 16, 16};
  std::int64_t heads = 4, dim = 64;
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--video") std::sscanf(value.c_str(), "%ldx%ldx%ld", &video.frames, &video.height, &video.width);
    else if (flag == "--heads") heads = std::atol(value.c_str());
    else if (flag == "--dim") dim = std::atol(value.c_str());
    else if (flag == "--reps") reps = std::atoi(value.c_str());
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const std::int64_t tokens = video.tokens();
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal;
  auto bf16_buffer = [&](std::int64_t n) {
    std::vector<std::uint16_t> buf(static_cast<std::size_t>(n));
    for (auto& x : buf) x = cpu::float_to_bf16(normal(rng));
    return buf;
  };
  const std::int64_t n = tokens * heads * dim;
  auto q = bf16_buffer(n), k = bf16_buffer(n), v = bf16_buffer(n);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(n));
  AttentionProblem p;
  p.q = TensorView::Contiguous(q.data(), DType::kBFloat16, {1, tokens, heads, dim});
  p.k = TensorView::Contiguous(k.data(), DType::kBFloat16, {1, tokens, heads, dim});
  p.v = TensorView::Contiguous(v.data(), DType::kBFloat16, {1, tokens, heads, dim});
  p.out = TensorView::Contiguous(out.data(), DType::kBFloat16, {1, tokens, heads, dim});
  p.video = video;
  if (Status s = validate_problem(p); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  const char* threads = std::getenv("OMP_NUM_THREADS");
  const std::int64_t cubes = tile_video_into_cubes(video).count();
  const double dense = best_seconds(reps, [&] { return run_sdpa_cpu(p); });
  std::printf("video %ldx%ldx%ld (%ld tokens, %ld cubes), 1 x %ld heads x d %ld, bfloat16, %s kernel, "
              "OMP_NUM_THREADS=%s, best of %d\n\n",
              video.frames, video.height, video.width, tokens, cubes, heads, dim,
              std::string(cpu_isa_name(default_cpu_isa())).c_str(), threads ? threads : "unset", reps);
  std::printf("| density | block-sparse ms | x dense | FASTVIDEO_VSA topk | VSA ms | x dense |\n|---|---|---|---|---|---|\n");
  std::printf("| dense (run_sdpa_cpu) | %.1f | 1.00 | | | |\n", dense * 1e3);
  for (double density : {1.0, 0.5, 0.25, 0.125}) {
    const BlockSparseLayout layout =
        random_layout(heads, tokens, std::max<std::int64_t>(1, static_cast<std::int64_t>(density * tile_count(tokens, 64))), rng);
    const double sparse = best_seconds(reps, [&] { return run_block_sparse_cpu(p, layout); });
    const std::int64_t topk = vsa_topk_for_sparsity(1.0 - density, cubes);
    const double vsa = best_seconds(reps, [&] { return run_fastvideo_vsa_cpu(p, topk); });
    std::printf("| %.3f | %.1f | %.2f | %ld | %.1f | %.2f |\n", block_sparse_density(layout), sparse * 1e3,
                dense / sparse, topk, vsa * 1e3, dense / vsa);
  }
  return 0;
}
