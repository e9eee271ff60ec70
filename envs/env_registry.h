// The one list of environment ids this service knows, and what can be said
// of each without its physics: spaces, action bounds and time limit. Run
// files are validated and resolved against it (runspec/), learners size
// their networks from it; only actors (and the one-process trainer) link the
// physics (envs/batched_env.h). env_registry_test checks every entry against
// the physics constants.
#ifndef RL_ENVS_ENV_REGISTRY_H_
#define RL_ENVS_ENV_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "envs/env_kind.h"
#include "proto/common.pb.h"

namespace rl {

// Static description of an environment.
struct EnvInfo {
  std::string id;            // e.g. "CartPole-v1"
  int observation_size = 0;  // length of one observation vector
  int num_actions = 0;       // discrete: number of actions; 0 if continuous
  int action_size = 0;       // continuous: action dimension; 0 if discrete
  float action_low = 0;      // continuous: bounds of each action component
  float action_high = 0;
  int max_episode_steps = 0;  // time limit in effect (truncation)
  // Every reward one step can give is in [reward_low, reward_high];
  // learners refuse segments outside it (a sick or hostile actor).
  float reward_low = 0;
  float reward_high = 0;
  bool discrete() const { return num_actions > 0; }
};

// "CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
// "MountainCarContinuous-v0", in that order.
const std::vector<std::string>& RegisteredEnvIds();

// INVALID_ARGUMENT listing the known ids for an unknown one.
absl::StatusOr<EnvKind> FindEnvKind(absl::string_view id);

// The registered description (Gymnasium's spaces and time limit).
EnvInfo DescribeEnv(EnvKind kind);

// Fills the fields of `env` that the service derives from its id
// (observation_size, num_discrete_actions, continuous_action_size, and
// max_episode_steps when 0). Fields already filled must agree with the
// registry. INVALID_ARGUMENT naming the field ("env.observation_size: ...")
// for an unknown id or a disagreeing field.
absl::Status ResolveEnvSpec(EnvSpec* env);

// The description of a resolved EnvSpec (action bounds from the registry,
// the time limit from the spec).
absl::StatusOr<EnvInfo> DescribeEnvSpec(const EnvSpec& env);

}  // namespace rl

#endif  // RL_ENVS_ENV_REGISTRY_H_
