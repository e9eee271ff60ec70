// Reward scaling (as Gymnasium's NormalizeReward): each environment keeps a
// discounted return G = gamma * G + r, reset at episode ends; rewards are
// divided by the running standard deviation of G over all environments.
// Runs over a time-major segment in place, one pass, vectorised over E.
#ifndef RL_ACTOR_REWARD_SCALER_H_
#define RL_ACTOR_REWARD_SCALER_H_

#include <cstdint>
#include <vector>

namespace rl {

class RewardScaler {
 public:
  RewardScaler(int64_t num_envs, float gamma);

  // rewards [T, E] are scaled in place; terminated/truncated [T, E].
  // alive [T, E] (agents that leave early, or null: every row): a padding
  // step (0) neither extends its row's return nor counts in the statistics.
  void Apply(float* rewards, const uint8_t* terminated,
             const uint8_t* truncated, int64_t num_steps,
             const uint8_t* alive = nullptr);

  // State for checkpoints: returns[E], then mean, var, count.
  std::vector<double> SaveState() const;
  bool RestoreState(const std::vector<double>& state);

  double variance() const { return var_; }

 private:
  int64_t num_envs_;
  double gamma_;
  std::vector<double> returns_;
  double mean_ = 0, var_ = 1, count_ = 1e-4;
};

}  // namespace rl

#endif  // RL_ACTOR_REWARD_SCALER_H_
