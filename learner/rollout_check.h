// What a rollout must be before a PPO update reads it: shapes and dtypes
// that fit the policy (observations, actions, masks, a recurrent policy's
// initial state), contiguous CPU buffers where GAE reads raw pointers,
// finite values, actions in range, and a batch the PPO settings can split
// into minibatches (whole env sequences for a recurrent policy, of whole
// copies for a central critic). One
// read-back for all the value checks.
#ifndef RL_LEARNER_ROLLOUT_CHECK_H_
#define RL_LEARNER_ROLLOUT_CHECK_H_

#include "absl/status/status.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

// OK, or INVALID_ARGUMENT naming the tensor (rollout.<name>) or the PPO
// setting at fault; INTERNAL for a LibTorch error.
absl::Status CheckRolloutForUpdate(const Rollout& rollout,
                                   const ActorCriticImpl& policy,
                                   const PPOConfig& config);

}  // namespace rl

#endif  // RL_LEARNER_ROLLOUT_CHECK_H_
