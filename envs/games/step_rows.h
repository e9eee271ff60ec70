// Where a test's BatchedEnv::Step writes: every output of `rows` rows of
// `obs_size` float observations, the optional ones (final observations,
// episode returns and lengths) included.
#ifndef RL_ENVS_GAMES_STEP_ROWS_H_
#define RL_ENVS_GAMES_STEP_ROWS_H_

#include <cstdint>
#include <vector>

#include "envs/env_plugin.h"

namespace rl {

struct StepRows {
  StepRows(int rows, int obs_size)
      : obs(rows * obs_size),
        final_obs(rows * obs_size),
        rewards(rows),
        returns(rows),
        term(rows),
        trunc(rows),
        lengths(rows) {}
  StepOutputs Outputs() {
    StepOutputs out;
    out.observations = obs.data();
    out.rewards = rewards.data();
    out.terminated = term.data();
    out.truncated = trunc.data();
    out.final_observations = final_obs.data();
    out.episode_returns = returns.data();
    out.episode_lengths = lengths.data();
    return out;
  }
  std::vector<float> obs, final_obs, rewards, returns;
  std::vector<uint8_t> term, trunc;
  std::vector<int32_t> lengths;
};

}  // namespace rl

#endif  // RL_ENVS_GAMES_STEP_ROWS_H_
