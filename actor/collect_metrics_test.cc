#include "actor/collect_metrics.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(CollectMetricsStepTest, FollowsTheRunsAxisAcrossARestart) {
  // One actor, 256 steps a segment, two segments with policy version 1
  // (made at 0 env steps), then one with a policy made at 1024.
  int64_t step = CollectMetricsStep(0, 0, 256);
  EXPECT_EQ(step, 256);
  step = CollectMetricsStep(step, 0, 256);
  EXPECT_EQ(step, 512);  // same policy: still moves on
  step = CollectMetricsStep(step, 1024, 256);
  EXPECT_EQ(step, 1280);
  // The actor restarts (its own count back to 0) in a run at 50,000 steps:
  // its curve goes on from there rather than folding back to 256.
  EXPECT_EQ(CollectMetricsStep(0, 50000, 256), 50256);
  // A learner resumed from an older checkpoint never moves it backwards.
  EXPECT_EQ(CollectMetricsStep(60000, 40000, 256), 60256);
}

}  // namespace
}  // namespace rl
