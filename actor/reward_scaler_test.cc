#include "actor/reward_scaler.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(RewardScalerTest, ScalesByTheStdOfDiscountedReturns) {
  // One env, constant reward 1, gamma 0: the return is always 1, so the
  // running variance goes to 0 quickly... use two envs with different
  // rewards so that the variance stays positive.
  RewardScaler scaler(2, 0.0f);
  const int T = 1000;
  std::vector<float> rewards(T * 2);
  for (int t = 0; t < T; ++t) {
    rewards[t * 2] = 1.0f;
    rewards[t * 2 + 1] = 3.0f;
  }
  std::vector<uint8_t> flags(T * 2, 0);
  scaler.Apply(rewards.data(), flags.data(), flags.data(), T);
  // Returns are {1, 3}: variance 1, so late rewards are divided by ~1.
  EXPECT_NEAR(scaler.variance(), 1.0, 0.01);
  EXPECT_NEAR(rewards[(T - 1) * 2], 1.0f, 0.01);
  EXPECT_NEAR(rewards[(T - 1) * 2 + 1], 3.0f, 0.03);
}

TEST(RewardScalerTest, EpisodeEndsResetTheDiscountedReturn) {
  RewardScaler a(1, 0.9f), b(1, 0.9f);
  std::vector<float> r1 = {1, 1, 1, 1}, r2 = {1, 1, 1, 1};
  const std::vector<uint8_t> none = {0, 0, 0, 0};
  const std::vector<uint8_t> done = {0, 1, 0, 0};
  a.Apply(r1.data(), none.data(), none.data(), 4);
  b.Apply(r2.data(), done.data(), none.data(), 4);
  EXPECT_NE(a.SaveState()[0], b.SaveState()[0]);
  // b restarted after step 1: G = 1 + 0.9 * 1 = 1.9 at the end.
  EXPECT_NEAR(b.SaveState()[0], 1.9, 1e-6);
}

TEST(RewardScalerTest, StateRoundTrips) {
  RewardScaler a(3, 0.99f);
  std::vector<float> r = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> f(6, 0);
  a.Apply(r.data(), f.data(), f.data(), 2);
  RewardScaler b(3, 0.99f);
  ASSERT_TRUE(b.RestoreState(a.SaveState()));
  EXPECT_EQ(a.SaveState(), b.SaveState());
  EXPECT_FALSE(RewardScaler(4, 0.99f).RestoreState(a.SaveState()));
}

}  // namespace
}  // namespace rl
