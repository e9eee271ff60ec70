// The environment ids this service knows, and their static descriptions.
#ifndef RL_ACTOR_ENV_REGISTRY_H_
#define RL_ACTOR_ENV_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "actor/batched_env.h"
#include "actor/env_batch.h"

namespace rl {

// "CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
// "MountainCarContinuous-v0", in that order.
// Must equal KnownEnvIds() of common/run_spec.h, which run files are
// validated against (tested in batched_env_test).
std::vector<std::string> RegisteredEnvIds();

// INVALID_ARGUMENT listing the known ids for an unknown one.
absl::StatusOr<EnvKind> FindEnvKind(absl::string_view id);

// The registered description (Gymnasium's spaces and time limit).
EnvInfo DescribeEnv(EnvKind kind);

// Length of the physical state (Gymnasium's env.unwrapped.state).
int EnvStateSize(EnvKind kind);

}  // namespace rl

#endif  // RL_ACTOR_ENV_REGISTRY_H_
