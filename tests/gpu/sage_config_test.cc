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

TEST(SageConfig, TheRuleNamesAKernelThatExists) {
  for (bool causal : {false, true})
    for (std::int64_t rows : {1, 512, 4096, 4608, 8192, 16384, 32760}) {
      const int g = sage_consumer_groups(rows, causal);
      EXPECT_TRUE(g == 2 || g == 3) << rows << (causal ? " causal" : "");
    }
}

}  // namespace
}  // namespace diffattn::sage
