// The test utilities themselves: each can fail the way a test relies on.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusMatchersTest, MatchStatusAndStatusOr) {
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(absl::StatusOr<int>(3), IsOk());
  EXPECT_THAT(absl::NotFoundError("x"), Not(IsOk()));
  EXPECT_THAT(absl::StatusOr<int>(absl::InternalError("boom")),
              StatusIs(absl::StatusCode::kInternal, "boom"));
  EXPECT_THAT(
      absl::InvalidArgumentError("env.id: unknown"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("env.id")));
  EXPECT_THAT(absl::InvalidArgumentError("env.id: unknown"),
              Not(StatusIs(absl::StatusCode::kNotFound)));
  EXPECT_THAT(absl::InvalidArgumentError("env.id: unknown"),
              Not(StatusIs(absl::StatusCode::kInvalidArgument, "other")));
}

TEST(StatusMatchersTest, AssignOrFail) {
  ASSERT_OK_AND_ASSIGN(const int value, absl::StatusOr<int>(7));
  EXPECT_EQ(value, 7);
  ASSERT_OK_AND_ASSIGN(auto text, absl::StatusOr<std::string>("a"));
  EXPECT_EQ(text, "a");
}

TEST(WaitForTest, ReturnsOnceTheConditionHolds) {
  std::atomic<bool> ready{false};
  std::thread setter([&] { ready = true; });
  EXPECT_TRUE(WaitFor([&] { return ready.load(); }, absl::Seconds(30)));
  setter.join();
}

TEST(WaitForTest, FalseAfterTheDeadline) {
  int calls = 0;
  EXPECT_FALSE(WaitFor([&] { return ++calls < 0; }, absl::Milliseconds(30),
                       absl::Milliseconds(1)));
  EXPECT_GE(calls, 2);  // polled, then once more at the deadline
}

TEST(TempDirTest, FreshAndEmptyPerTest) {
  const std::string dir = MakeTestDir("a");
  ASSERT_FALSE(dir.empty());
  EXPECT_THAT(dir, HasSubstr("TempDirTest.FreshAndEmptyPerTest"));
  std::ofstream(dir + "/file") << "x";
  EXPECT_EQ(MakeTestDir("a"), dir);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(RunSpecsTest, SmallSpecIsResolvedAndOverridable) {
  const RunSpec spec = SmallRunSpec();
  EXPECT_EQ(spec.env().id(), "CartPole-v1");
  EXPECT_EQ(spec.env().observation_size(), 4);  // resolved
  EXPECT_EQ(spec.envs_per_actor(), 4);
  const RunSpec pendulum =
      SmallRunSpec("env: {id: Pendulum-v1}\nppo: {num_epochs: 3}");
  EXPECT_EQ(pendulum.env().continuous_action_size(), 1);
  EXPECT_EQ(pendulum.ppo().num_epochs(), 3);
  EXPECT_EQ(pendulum.ppo().num_minibatches(), 2);  // kept from the base
}

}  // namespace
}  // namespace rl
