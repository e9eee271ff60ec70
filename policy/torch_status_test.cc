#include "policy/torch_status.h"

#include <torch/types.h>

#include <stdexcept>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(TorchStatusTest, ResultsPassThrough) {
  absl::StatusOr<int> value = CatchTorchErrors("x", [] { return 7; });
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 7);
  int calls = 0;
  absl::Status done = CatchTorchErrors("x", [&] { ++calls; });
  EXPECT_TRUE(done.ok());
  EXPECT_EQ(calls, 1);
  absl::Status status = CatchTorchErrors(
      "x", [] { return absl::NotFoundError("kept as it is"); });
  EXPECT_EQ(status, absl::NotFoundError("kept as it is"));
  absl::StatusOr<int> nested = CatchTorchErrors(
      "x", []() -> absl::StatusOr<int> { return absl::AbortedError("a"); });
  EXPECT_EQ(nested.status(), absl::AbortedError("a"));
}

TEST(TorchStatusTest, LibTorchErrorsBecomeStatusesNamingWhatFailed) {
  // A shape mismatch inside an operator: a plain c10::Error.
  absl::StatusOr<torch::Tensor> product =
      CatchTorchErrors("multiplying the weights", [] {
        return torch::matmul(torch::ones({2, 3}), torch::ones({4, 5}));
      });
  EXPECT_EQ(product.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(product.status().message()),
              HasSubstr("multiplying the weights: "));
  // No backtrace in the message: it is meant for users.
  EXPECT_THAT(std::string(product.status().message()),
              Not(HasSubstr("frame #")));

  // An index out of range: c10::IndexError, the caller's mistake.
  absl::StatusOr<torch::Tensor> index =
      CatchTorchErrors("indexing", [] { return torch::zeros({3})[5]; });
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(index.status().message()), HasSubstr("indexing: "));

  absl::Status other = CatchTorchErrors(
      "loading", [] { throw std::runtime_error("disk on fire"); },
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other, absl::InvalidArgumentError("loading: disk on fire"));
}

TEST(TorchStatusTest, CheckTensorNamesTheTensorAndBothShapes) {
  const torch::Tensor t = torch::zeros({3, 5});
  EXPECT_TRUE(CheckTensor(t, "obs", torch::kFloat32, {-1, 5}).ok());
  EXPECT_EQ(CheckTensor(t, "obs", torch::kFloat32, {-1, 4}),
            absl::InvalidArgumentError(
                "obs: expected Float[-1, 4], got Float[3, 5]"));
  EXPECT_EQ(CheckTensor(t, "obs", torch::kInt64, {3, 5}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTensor(t, "obs", torch::kFloat32, {3, 5, 1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      CheckTensor(torch::Tensor(), "obs", torch::kFloat32, {3}),
      absl::InvalidArgumentError("obs: expected Float[3], got undefined"));
}

TEST(TorchStatusTest, CheckFiniteFindsNanAndInf) {
  torch::Tensor t = torch::zeros({4, 2});
  EXPECT_TRUE(CheckFinite(t, "rewards").ok());
  EXPECT_TRUE(CheckFinite(torch::zeros({0}), "rewards").ok());
  EXPECT_TRUE(CheckFinite(torch::zeros({2}, torch::kInt64), "actions").ok());
  t[2][1] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(CheckFinite(t, "rewards"),
            absl::InvalidArgumentError("rewards: values must be finite (found "
                                       "NaN or inf in Float[4, 2])"));
  t[2][1] = std::nanf("");
  EXPECT_EQ(CheckFinite(t, "rewards").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rl
