// What one environment's physics step returns besides its new state.
#ifndef RL_ENVS_STEP_RESULT_H_
#define RL_ENVS_STEP_RESULT_H_

namespace rl {

struct StepResult {
  float reward = 0;
  bool terminated = false;
};

}  // namespace rl

#endif  // RL_ENVS_STEP_RESULT_H_
