#include "diffattn/status.h"

#include <gtest/gtest.h>

namespace diffattn {
namespace {

Result<int> half_of(int x) {
  if (x % 2 != 0) return InvalidInput("odd value " + std::to_string(x) + "; pass an even number");
  return x / 2;
}

Result<int> quarter_of(int x) {
  int h = 0;
  DIFFATTN_ASSIGN_OR_RETURN(h, half_of(x));
  return half_of(h);
}

TEST(Status, ExitCodesFollowTheCliContract) {
  EXPECT_EQ(exit_code_for(ErrorCode::kOk), 0);
  EXPECT_EQ(exit_code_for(ErrorCode::kInvalidConfig), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::kUnknownBackend), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::kUnsupported), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kUnavailable), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kInternal), 1);
}

TEST(Status, ResultPropagatesTheFirstError) {
  EXPECT_EQ(*quarter_of(12), 3);
  auto r = quarter_of(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(r.status().message().find("odd value 3"), std::string::npos);
}

}  // namespace
}  // namespace diffattn
