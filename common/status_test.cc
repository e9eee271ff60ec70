#include "common/status.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int half, Half(x));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusTest, AssignOrReturnPassesValuesAndErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
}

TEST(StatusTest, ReturnIfErrorReturnsFirstError) {
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rl
