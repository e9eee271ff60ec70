#include "learner/learner_progress.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

RunSpec Spec() {
  RunSpec spec;
  spec.set_total_env_steps(1000);
  spec.set_target_return(100);
  return spec;
}

ReturnWindow Full(float value) {
  ReturnWindow w;
  for (size_t i = 0; i < ReturnWindow::kSize; ++i) w.Add(value);
  return w;
}

TEST(LearnerProgressTest, CountsUpdatesAndEndsAtTheBudgetOrTheTarget) {
  LearnerProgress progress(Spec());
  LearnerStatus status;
  progress.FillStatus(&status);
  EXPECT_EQ(status.policy_version(), 1);
  EXPECT_FALSE(status.has_progress());  // no update yet

  EXPECT_FALSE(progress.Reaches(Full(99)));
  progress.CountUpdate(400, 3, Full(99), /*target_reached=*/false);
  EXPECT_FALSE(progress.Finished());
  progress.CountUpdate(400, 2, Full(150), /*target_reached=*/true);
  EXPECT_TRUE(progress.Finished());
  progress.FillStatus(&status);
  EXPECT_EQ(status.env_steps(), 800);
  EXPECT_EQ(status.updates(), 2);
  EXPECT_EQ(status.policy_version(), 3);
  EXPECT_EQ(status.progress().episodes(), 5);
  EXPECT_EQ(status.progress().target_reached_at_steps(), 800);
  EXPECT_DOUBLE_EQ(status.progress().mean_return(), 150);

  RunSpec no_target = Spec();
  no_target.clear_target_return();
  EXPECT_FALSE(LearnerProgress(no_target).Reaches(Full(1e9)));
  LearnerProgress budget(no_target);
  budget.CountUpdate(1000, 0, ReturnWindow(), false);
  EXPECT_TRUE(budget.Finished());
}

TEST(LearnerProgressTest, SavesAndRestoresThroughATrainingState) {
  LearnerProgress progress(Spec());
  progress.CountUpdate(256, 4, Full(120), /*target_reached=*/true);
  TrainingState state;
  progress.Save(&state);
  EXPECT_EQ(state.recent_returns_size(), 100);

  LearnerProgress resumed(Spec());
  resumed.Restore(state);
  EXPECT_EQ(resumed.env_steps(), 256);
  EXPECT_EQ(resumed.updates(), 1);
  EXPECT_EQ(resumed.policy_version(), 2);
  EXPECT_TRUE(resumed.Finished());  // the target was reached before
  EXPECT_DOUBLE_EQ(resumed.returns().Mean(), 120);
  TrainingState again;
  resumed.Save(&again);
  EXPECT_EQ(again.SerializeAsString(), state.SerializeAsString());
}

}  // namespace
}  // namespace rl
