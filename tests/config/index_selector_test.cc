#include <gtest/gtest.h>

#include <random>

#include "config/config_test_util.h"
#include "config/index_selector.h"
#include "diffattn/config.h"

namespace diffattn {
namespace {

using Indices = std::set<std::int64_t>;
using testing_config::expect_config_error;

TEST(IndexSelectorTest, IndicesAndRanges) {
  EXPECT_EQ(parse_index_selector("0-3,38", "f").value(), (Indices{0, 1, 2, 3, 38}));
  EXPECT_EQ(parse_index_selector(" 5 , 1 - 2 ,5", "f").value(), (Indices{1, 2, 5}));
  EXPECT_EQ(parse_index_selector("7-7", "f").value(), (Indices{7}));
  EXPECT_EQ(parse_index_selector("0-9,20,25-30", "f").value().size(), 17u);
}

TEST(IndexSelectorTest, EmptySelectorSelectsNothing) {
  EXPECT_TRUE(parse_index_selector("", "f").value().empty());
  EXPECT_TRUE(parse_index_selector("  ", "f").value().empty());
}

TEST(IndexSelectorTest, MalformedSelectorsNameTheFieldAndTheProblem) {
  expect_config_error(parse_index_selector("1,,2", "default: block_sparse.skip_layers").status(),
                      {"default: block_sparse.skip_layers is not a valid index selector ('1,,2')", "empty",
                       "such as '0-3,38'"});
  expect_config_error(parse_index_selector("3-1", "f").status(), {"runs backwards"});
  expect_config_error(parse_index_selector("-1", "f").status(), {"an index is missing"});
  expect_config_error(parse_index_selector("a", "f").status(), {"'a' is not a non-negative integer"});
  expect_config_error(parse_index_selector("1-", "f").status(), {"an index is missing"});
  expect_config_error(parse_index_selector("1-2-3", "f").status(), {"not a non-negative integer"});
  expect_config_error(parse_index_selector("1.5", "f").status(), {"not a non-negative integer"});
}

TEST(IndexSelectorTest, HugeRangesAreRejectedNotExpanded) {
  expect_config_error(parse_index_selector("0-99999999999999999999", "f").status(), {"above the largest layer index"});
  expect_config_error(parse_index_selector("70000", "f").status(), {"above the largest layer index 65535"});
  EXPECT_EQ(parse_index_selector("0-65535", "f").value().size(), 65536u);
  std::string repeated = "0-65535";
  for (int i = 0; i < 4; ++i) repeated += ",0-65535";
  expect_config_error(parse_index_selector(repeated, "f").status(), {"more than 262144 indices in all"});
}

TEST(IndexSelectorTest, FormattedIndicesParseBack) {
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 200; ++round) {
    Indices indices;
    for (int i = std::uniform_int_distribution<int>(1, 20)(rng); i > 0; --i) {
      indices.insert(std::uniform_int_distribution<std::int64_t>(0, config_detail::kMaxLayerIndex)(rng));
    }
    EXPECT_EQ(parse_index_selector(config_detail::format_index_selector(indices), "f").value(), indices);
  }
}

}  // namespace
}  // namespace diffattn
