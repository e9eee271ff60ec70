// Generalised advantage estimation over a time-major segment, vectorised over
// environments (the inner loop runs over E contiguous floats).
//
//   delta_t = r_t + gamma * V_next_t - V(s_t),  A_t = delta_t +
//   gamma*lambda*A_{t+1}
// where V_next_t is V(s_{t+1}) inside an episode, V(final observation) when the
// episode was truncated at t (bootstrap), and 0 when it terminated at t; the
// recursion does not cross an episode end. returns = advantages + values.
#ifndef RL_LEARNER_GAE_H_
#define RL_LEARNER_GAE_H_

#include <cstdint>

namespace rl {

struct GaeInputs {
  int64_t num_steps = 0;                    // T
  int64_t num_envs = 0;                     // E
  const float* rewards = nullptr;           // [T, E]
  const float* values = nullptr;            // [T, E]
  const float* next_values = nullptr;       // [E]: V after the last step
  const uint8_t* terminated = nullptr;      // [T, E]
  const uint8_t* truncated = nullptr;       // [T, E]
  const float* truncated_values = nullptr;  // [T, E]: V(final obs) if truncated
};

// Writes advantages and returns, [T, E] each.
void ComputeGae(const GaeInputs& in, float gamma, float lambda,
                float* advantages, float* returns);

}  // namespace rl

#endif  // RL_LEARNER_GAE_H_
