#include "learner/gae.h"

#include <vector>

namespace rl {

void ComputeGae(const GaeInputs& in, float gamma, float lambda,
                float* advantages, float* returns) {
  const int64_t T = in.num_steps, E = in.num_envs;
  std::vector<float> carry(E, 0.0f);  // A_{t+1} within the episode
  for (int64_t t = T - 1; t >= 0; --t) {
    const int64_t row = t * E;
    const float* next_v = t == T - 1 ? in.next_values : in.values + row + E;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t i = row + e;
      const bool term = in.terminated[i] != 0;
      const bool trunc = in.truncated[i] != 0 && !term;
      const bool done = term || trunc;
      const float bootstrap =
          term ? 0.0f : (trunc ? in.truncated_values[i] : next_v[e]);
      const float delta = in.rewards[i] + gamma * bootstrap - in.values[i];
      const float adv = delta + (done ? 0.0f : gamma * lambda * carry[e]);
      carry[e] = adv;
      advantages[i] = adv;
      returns[i] = adv + in.values[i];
    }
  }
}

}  // namespace rl
