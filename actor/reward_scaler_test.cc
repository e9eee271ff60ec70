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

// Agents that leave early: a padding step neither extends its row's return
// nor counts in the statistics. Envs {0, 1} with env 1 padding from step 2
// on scale env 0's rewards exactly as a scaler of env 0 and env 1's first
// two steps would; all alive is the plain scaler, bit for bit.
TEST(RewardScalerTest, PaddingStepsOfAgentsThatLeftAreNotReturns) {
  const int T = 50;
  std::vector<float> rewards(T * 2), plain;
  std::vector<uint8_t> alive(T * 2, 1), flags(T * 2, 0);
  for (int t = 0; t < T; ++t) {
    rewards[t * 2] = 1.0f + (t % 3);
    rewards[t * 2 + 1] = t < 2 ? 5.0f : 0.0f;
    if (t >= 2) alive[t * 2 + 1] = 0;
  }
  plain = rewards;
  std::vector<float> all_alive = rewards;
  RewardScaler a(2, 0.9f), b(2, 0.9f), c(2, 0.9f);
  a.Apply(all_alive.data(), flags.data(), flags.data(), T,
          std::vector<uint8_t>(T * 2, 1).data());
  b.Apply(plain.data(), flags.data(), flags.data(), T);
  EXPECT_EQ(all_alive, plain);
  EXPECT_EQ(a.SaveState(), b.SaveState());
  std::vector<float> padded = rewards;
  c.Apply(padded.data(), flags.data(), flags.data(), T, alive.data());
  // By hand: the statistics of env 1's two steps, then env 0's alone.
  RewardScaler two(2, 0.9f), one(1, 0.9f);
  std::vector<float> head(rewards.begin(), rewards.begin() + 4);
  two.Apply(head.data(), flags.data(), flags.data(), 2);
  std::vector<double> state = two.SaveState();  // returns[2], mean, var, count
  ASSERT_TRUE(one.RestoreState({state[0], state[2], state[3], state[4]}));
  std::vector<float> tail;
  for (int t = 2; t < T; ++t) tail.push_back(rewards[t * 2]);
  one.Apply(tail.data(), flags.data(), flags.data(), T - 2);
  for (int t = 2; t < T; ++t) {
    EXPECT_FLOAT_EQ(padded[t * 2], tail[t - 2]) << "step " << t;
    EXPECT_EQ(padded[t * 2 + 1], 0.0f) << "step " << t;
  }
  EXPECT_DOUBLE_EQ(c.variance(), one.variance());
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
