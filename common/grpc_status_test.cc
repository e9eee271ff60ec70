#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(GrpcStatusTest, EveryCodeRoundTripsWithItsMessage) {
  for (int code = 0; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code),
                              code == 0 ? "" : "what went wrong");
    const grpc::Status wire = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    EXPECT_EQ(FromGrpcStatus(wire), status);
  }
}

TEST(GrpcStatusTest, NamedCodesMatch) {
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"))
                .code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rl
