#include "testing/run_checkpoint.h"

#include "common/status.h"
#include "envs/env_registry.h"
#include "learner/checkpoint.h"
#include "policy/actor_critic.h"

namespace rl {

absl::Status LoadRunCheckpoint(const RunSpec& spec, const std::string& dir) {
  ASSIGN_OR_RETURN(const EnvInfo info, DescribeEnvSpec(spec.env()));
  ASSIGN_OR_RETURN(ActorCritic policy,
                   CreateActorCritic(MakeActorCriticConfig(
                       info.observation_size, info.num_actions,
                       info.action_size, spec.ppo())));
  return ReadCheckpoint(dir, policy, nullptr, nullptr);
}

}  // namespace rl
