// FASTVIDEO_VSA's cube arithmetic (the map the CUDA kernels evaluate in place) against the host
// tables built from it: each padding slot holds no token, each valid slot the token whose slot it is.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/sparse/vsa_cube_map.h"
#include "kernels/sparse/vsa_cubes.h"

namespace diffattn {
namespace {

TEST(VsaCubeMap, TokenAtInvertsTheSlotOfEveryTokenAndMarksPadding) {
  for (const VideoGeometry g : {VideoGeometry{5, 6, 7}, VideoGeometry{8, 8, 8}, VideoGeometry{1, 1, 1},
                                VideoGeometry{3, 5, 9}, VideoGeometry{21, 30, 52}}) {
    SCOPED_TRACE(std::to_string(g.frames) + "x" + std::to_string(g.height) + "x" + std::to_string(g.width));
    const VsaCubeMap map{g.frames, g.height, g.width};
    const VsaCubes cubes = tile_video_into_cubes(g);
    ASSERT_EQ(map.cubes(), cubes.count());
    std::vector<std::int64_t> expected(static_cast<std::size_t>(cubes.padded_length()), -1);
    for (std::int64_t token = 0; token < g.tokens(); ++token)
      expected[static_cast<std::size_t>(cubes.slot[static_cast<std::size_t>(token)])] = token;
    for (std::int64_t slot = 0; slot < cubes.padded_length(); ++slot)
      ASSERT_EQ(map.token_at(slot), expected[static_cast<std::size_t>(slot)]) << "slot " << slot;
    for (std::int64_t c = 0; c < cubes.count(); ++c) {
      // A cube's valid tokens fill its first slots.
      const std::int32_t valid = cubes.valid[static_cast<std::size_t>(c)];
      EXPECT_EQ(map.valid(c), valid);
      EXPECT_GE(map.token_at(c * kVsaCubeTokens + valid - 1), 0);
      if (valid < kVsaCubeTokens) {
        EXPECT_EQ(map.token_at(c * kVsaCubeTokens + valid), -1);
      }
    }
  }
}

}  // namespace
}  // namespace diffattn
