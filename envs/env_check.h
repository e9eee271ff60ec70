// check-env: steps an environment (built-in or plugin) with random actions
// and reports its spaces, its step rate, and the first violation of the
// plugin contract it finds. It works on the plugin table itself (not
// through OpenEnv's checks), so it sees what the plugin really writes.
//
//   rl_local check-env --run=examples/plugin_env/chase.yaml --steps=10000
#ifndef RL_ENVS_ENV_CHECK_H_
#define RL_ENVS_ENV_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/common.pb.h"

namespace rl {

struct EnvCheckOptions {
  int64_t steps = 10000;  // batch steps
  int num_envs = 8;       // rounded up to whole environments of several agents
  uint64_t seed = 1;
  std::optional<std::vector<std::string>> search_path;  // env_plugin.h
};

struct EnvCheckReport {
  std::string origin;       // the plugin's path, or "built-in <id>"
  std::string plugin_name;  // as the plugin names itself
  std::string observation;  // "Box(float32, [2])"
  std::string action;
  double reward_low = 0, reward_high = 0;
  bool action_masks = false;
  std::string agents;  // "2 agents per environment (player_0, player_1)"
  int64_t steps = 0;   // environment steps taken (batch steps x envs)
  double steps_per_second = 0;
  int64_t episodes = 0;
  double mean_return = 0;  // of the finished episodes, random actions
  // Whether a saved state plays on exactly (save_state), or that the env
  // saves none; empty when the check stopped before it.
  std::string state;
  // The first violation found; empty when none.
  std::string violation;
};

// Loads and checks. An error is what keeps the check from running at all
// (a plugin that cannot load or create); a contract violation is in the
// report. Checks, in order: the declared spaces against the run's spec;
// reset deterministic under one seed (two batches compared); then every
// step: observations finite and inside the declared Box bounds, rewards
// finite and inside the declared range, flags 0 or 1 and never both,
// masks leaving at least one valid action, steps deterministic too; last,
// where the env saves its state, that state restored into a fresh batch
// (made as a resumed run makes it) plays on exactly as the original (up to
// 200 steps).
absl::StatusOr<EnvCheckReport> CheckEnv(const EnvSpec& spec,
                                        const EnvCheckOptions& options);

// The report as rl_local prints it.
std::string FormatEnvCheckReport(const EnvCheckReport& report);

}  // namespace rl

#endif  // RL_ENVS_ENV_CHECK_H_
