// Several agents per environment copy (envs/plugin_api/rl_env_plugin.h,
// the optional `agents`): what a plugin's batch declares, checked, and
// checked against the run's env.agents_per_env. A copy of A agents is A
// rows of the batch (agent k of copy c at row c * A + k), so everything
// past the plugin boundary (collectors, rollouts, learners) sees rows.
#ifndef RL_ENVS_ENV_AGENTS_H_
#define RL_ENVS_ENV_AGENTS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "envs/plugin_api/rl_env_plugin.h"
#include "proto/common.pb.h"

namespace rl {

// The most agents one environment copy may hold.
inline constexpr int kMaxAgentsPerEnv = 1024;

// Agents per copy the run declares: env.agents_per_env, 0 meaning 1.
inline int AgentsPerEnv(const EnvSpec& env) {
  return std::max(1, env.agents_per_env());
}

struct EnvAgents {
  int per_env = 1;
  std::vector<std::string> names;  // per_env of them ("0", "1" unnamed)
};

// The agents `plugin`'s batch `env` declares: one per copy where the table
// has no `agents`. FAILED_PRECONDITION naming what is wrong: a failing
// call, a count outside [1, kMaxAgentsPerEnv], an empty, overlong (64) or
// repeated name.
absl::StatusOr<EnvAgents> ReadEnvAgents(const rl_env_plugin* plugin,
                                        rl_env* env, const std::string& origin);

// OK if the plugin's agents per copy are the run's env.agents_per_env;
// FAILED_PRECONDITION naming both sides otherwise.
absl::Status CheckEnvAgents(const EnvAgents& agents, const EnvSpec& spec,
                            const std::string& origin);

// Where the run allows agents to leave early (env.agents_leave): calls the
// plugin's allow_leaving, after which its step writes `alive`. OK and no
// call where the run does not allow it. FAILED_PRECONDITION naming the
// plugin where its table has no allow_leaving or the call refuses.
absl::Status AllowLeaving(const rl_env_plugin* plugin, rl_env* env,
                          const EnvSpec& spec, const std::string& origin);

// One step of a batch of `n` rows whose agents may leave early, checked
// against rl_env_plugin.h's rules ("Agents that leave early"):
// `was_alive` is each row's alive before the step (all 1 after a reset);
// `alive`, `rewards`, `terminated`, `truncated` what the step wrote. In
// each copy of `per_env` rows, either the game goes on (an alive row that
// ended left: alive 0; one that did not stays alive; padding stays
// padding) or it ended (every alive row ended) and every row is alive
// again; padding rows have reward and flags 0; a copy has an agent alive.
// "" when the step keeps them, else what is wrong, naming the row.
std::string CheckLeavingStep(const uint8_t* was_alive, const uint8_t* alive,
                             const float* rewards, const uint8_t* terminated,
                             const uint8_t* truncated, int64_t n, int per_env);

// "2 per environment (player_0, player_1)", "1 per environment".
std::string DescribeAgents(const EnvAgents& agents);

// `num_envs` rounded up to a whole number of copies of `spec`'s agents.
int WholeCopies(int num_envs, const EnvSpec& spec);

}  // namespace rl

#endif  // RL_ENVS_ENV_AGENTS_H_
