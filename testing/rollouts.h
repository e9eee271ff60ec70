// Rollouts compared tensor by tensor in tests: two collectors, or a
// collector before and after a resume, must have collected the same
// segment bit for bit.
#ifndef RL_TESTING_ROLLOUTS_H_
#define RL_TESTING_ROLLOUTS_H_

#include "gtest/gtest.h"
#include "policy/rollout.h"

namespace rl {

inline void ExpectSameRollout(const Rollout& a, const Rollout& b) {
  EXPECT_TRUE(torch::equal(a.observations, b.observations));
  EXPECT_TRUE(torch::equal(a.actions, b.actions));
  EXPECT_TRUE(torch::equal(a.log_probs, b.log_probs));
  EXPECT_TRUE(torch::equal(a.values, b.values));
  EXPECT_TRUE(torch::equal(a.rewards, b.rewards));
  EXPECT_TRUE(torch::equal(a.terminated, b.terminated));
  EXPECT_TRUE(torch::equal(a.truncated, b.truncated));
  EXPECT_TRUE(torch::equal(a.truncated_values, b.truncated_values));
  EXPECT_TRUE(torch::equal(a.next_observations, b.next_observations));
  EXPECT_TRUE(torch::equal(a.next_values, b.next_values));
}

}  // namespace rl

#endif  // RL_TESTING_ROLLOUTS_H_
