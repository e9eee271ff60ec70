// The example sweep end to end: eight learning rates for CartPole with
// ASHA; the best trial solves CartPole (mean return >= 475), the others are
// stopped at their rung with the reason, and the table says so.
#include <torch/utils.h>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "trainer/local_sweep.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

TEST(LocalSweepExampleTest, EightLearningRatesWithAshaSolveCartPole) {
  torch::set_num_threads(1);
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

}  // namespace
}  // namespace rl
