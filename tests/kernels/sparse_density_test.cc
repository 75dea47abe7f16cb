// The density the runner reports for the sparse video backends is the one their calls compute: for
// RAINFUSION_ATTN the plan's own density on random inputs, for FASTVIDEO_VSA topk over the cubes.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/rainfusion_cpu.h"
#include "kernels/cpu/vsa_cpu.h"
#include "kernels/sparse/block_sparse_layout.h"
#include "kernels/sparse/sparse_density.h"
#include "parity/cases.h"

namespace diffattn {
namespace {

testing::ParityCase video_case(const VideoGeometry& g) {
  return testing::video_case(DType::kFloat32, g, 2, 2, /*head_size=*/32);
}

TEST(SparseDensity, RainfusionsIsItsPlansDensity) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<std::int64_t> extent(2, 20), text(0, 150);
  for (int i = 0; i < 6; ++i) {
    VideoGeometry g{extent(rng) / 2 + 1, extent(rng), extent(rng) + 8};
    g.text_before = i % 2 ? text(rng) : 0;
    g.text_after = i % 3 ? text(rng) : 0;
    auto data = testing::make_case_data(video_case(g), rng);
    for (double s : {0.0, 0.5, 0.8}) {
      AttentionSpec spec;
      spec.backend = "RAINFUSION_ATTN";
      spec.block_sparse = BlockSparseSpec{};
      spec.block_sparse->sparsity = s;
      const auto d = sparse_video_density("RAINFUSION_ATTN", spec, g);
      ASSERT_TRUE(d.has_value());
      RainFusionParams params;
      params.sparsity = s;
      RainFusionPlan plan;
      ASSERT_TRUE(run_rainfusion_cpu(data->problem, params, &plan).ok());
      EXPECT_NEAR(d->density, plan.density, 1e-12) << g.frames << "x" << g.height << "x" << g.width << " s " << s;
      EXPECT_NE(d->detail.find("video tiles per video query tile"), std::string::npos) << d->detail;
    }
  }
}

TEST(SparseDensity, FastvideoVsasIsTopkOverTheCubesAndOthersHaveNone) {
  const VideoGeometry g{5, 9, 12};  // 2 x 3 x 3 cubes
  AttentionSpec spec;
  spec.backend = "FASTVIDEO_VSA";
  spec.fastvideo_vsa_topk = 3;
  const auto d = sparse_video_density("FASTVIDEO_VSA", spec, g);
  ASSERT_TRUE(d.has_value());
  EXPECT_DOUBLE_EQ(d->density, 3.0 / 18.0);
  EXPECT_EQ(d->detail, "3 of 18 key cubes per query cube");
  spec.fastvideo_vsa_topk.reset();
  EXPECT_DOUBLE_EQ(sparse_video_density("FASTVIDEO_VSA", spec, g)->density, 1.0);
  spec.fastvideo_vsa_topk = 19;  // more than the geometry gives: the backend refuses the call
  EXPECT_FALSE(sparse_video_density("FASTVIDEO_VSA", spec, g).has_value());
  EXPECT_FALSE(sparse_video_density("FLASH_ATTN", AttentionSpec{}, g).has_value());
  EXPECT_FALSE(sparse_video_density("RAINFUSION_ATTN", AttentionSpec{}, VideoGeometry{0, 4, 4}).has_value());
}

}  // namespace
}  // namespace diffattn
