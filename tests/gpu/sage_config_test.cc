// SAGE_ATTN's Hopper kernel shape rule (kernels/cuda/sage/sage_config.h), on the CPU.
#include "kernels/cuda/sage/sage_config.h"

#include <gtest/gtest.h>

namespace diffattn::sage {
namespace {

TEST(SageConfig, QueryTilesCoverEveryRow) {
  for (int groups : {2, 3})
    for (std::int64_t rows : {1, 63, 64, 127, 128, 129, 191, 192, 193, 4608, 32760}) {
      const std::int64_t tile = 64 * groups, blocks = sage_m_blocks(rows, groups);
      EXPECT_GE(blocks * tile, rows) << rows << " rows, " << groups << " groups";
      EXPECT_LT((blocks - 1) * tile, rows) << rows << " rows, " << groups << " groups";
    }
  EXPECT_EQ(sage_m_blocks(0, 3), 0);
}

// The measured rule: three in-order groups, except at hd64 up to 4096 query rows.
TEST(SageConfig, ThreeGroupsExceptShortHeadSize64Rows) {
  for (std::int64_t rows : {1, 512, 4096, 4429, 32760}) EXPECT_EQ(sage_consumer_groups(128, rows), 3) << rows;
  EXPECT_EQ(sage_consumer_groups(64, 1), 2);
  EXPECT_EQ(sage_consumer_groups(64, kSageHd64TwoGroupMaxRows), 2);
  EXPECT_EQ(sage_consumer_groups(64, kSageHd64TwoGroupMaxRows + 1), 3);
  EXPECT_EQ(sage_consumer_groups(64, 16384), 3);
}

}  // namespace
}  // namespace diffattn::sage
