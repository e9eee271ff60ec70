// What one environment's physics step returns besides its new state.
#ifndef RL_ACTOR_ENVS_STEP_RESULT_H_
#define RL_ACTOR_ENVS_STEP_RESULT_H_

namespace rl {

struct StepResult {
  float reward = 0;
  bool terminated = false;
};

}  // namespace rl

#endif  // RL_ACTOR_ENVS_STEP_RESULT_H_
