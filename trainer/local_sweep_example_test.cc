// The example sweeps end to end: eight learning rates for CartPole with
// ASHA; the best trial solves CartPole (mean return >= 475), the others are
// stopped at their rung with the reason, and the table says so. And
// population-based training of Pendulum (5 members x 300k env steps): its
// worst members copy better ones, and its best learns (a random policy
// scores about -1,200).

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "trainer/local_sweep.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

TEST(LocalSweepExampleTest, EightLearningRatesWithAshaSolveCartPole) {
  const std::string dir = MakeTestDir("cartpole-lr");
  ASSERT_OK_AND_ASSIGN(
      const std::vector<TrialOutcome> outcomes,
      RunLocalSweepFile("examples/sweeps/cartpole_lr.yaml", dir, 1));
  ASSERT_EQ(outcomes.size(), 8u);
  int solved = 0, stopped_at_first_rung = 0;
  for (const TrialOutcome& o : outcomes) {
    if (o.state == "DONE" && o.target_reached) ++solved;
    if (o.state == "STOPPED" &&
        absl::StrContains(o.reason,
                          "stopped early at rung 1 (25000 env "
                          "steps) by asha")) {
      ++stopped_at_first_rung;
    }
    EXPECT_NE(o.state, "FAILED") << o.reason;
  }
  EXPECT_GE(solved, 1);
  EXPECT_EQ(stopped_at_first_rung, 4);  // the worse half of eight
  EXPECT_THAT(ReadTestFile(dir + "/results.txt"),
              HasSubstr("best: ppo.learning_rate="));
}

TEST(LocalSweepExampleTest, PbtLearnsPendulumCopyingItsBestMembers) {
  const std::string dir = MakeTestDir("pendulum-pbt");
  testing::internal::CaptureStdout();
  const auto outcomes_or =
      RunLocalSweepFile("examples/sweeps/pendulum_pbt.yaml", dir, 1);
  const std::string printed = testing::internal::GetCapturedStdout();
  ASSERT_OK(outcomes_or.status());
  const std::vector<TrialOutcome>& outcomes = *outcomes_or;
  ASSERT_EQ(outcomes.size(), 5u);
  double best = -1e9;
  for (const TrialOutcome& o : outcomes) {
    EXPECT_EQ(o.state, "DONE") << o.reason;
    EXPECT_GE(o.env_steps, 300000);
    best = std::max(best, o.score);
    // Every step of a lineage was a copy the log announced.
    for (const std::string& step : o.lineage) {
      EXPECT_THAT(printed, HasSubstr("\n" + step + "\n"));
    }
  }
  EXPECT_GE(best, -400);
  // Nine rounds end before the budget, each with one copy unless the
  // worst member's score ties the donor's: the log's lines "trial N at".
  int copies = 0;
  for (absl::string_view line : absl::StrSplit(printed, '\n')) {
    copies += absl::StartsWith(line, "trial ") &&
              absl::StrContains(line, " env steps: copied trial ");
  }
  EXPECT_GE(copies, 5);
  EXPECT_LE(copies, 9);
  EXPECT_THAT(ReadTestFile(dir + "/results.txt"),
              HasSubstr("lineage of trial "));
}

}  // namespace
}  // namespace rl
