#include "actor/reward_scaler.h"

#include <cmath>

namespace rl {

RewardScaler::RewardScaler(int64_t num_envs, float gamma)
    : num_envs_(num_envs), gamma_(gamma), returns_(num_envs, 0.0) {}

void RewardScaler::Apply(float* rewards, const uint8_t* terminated,
                         const uint8_t* truncated, int64_t num_steps,
                         const uint8_t* alive) {
  const int64_t E = num_envs_;
  for (int64_t t = 0; t < num_steps; ++t) {
    float* r = rewards + t * E;
    const uint8_t* in = alive != nullptr ? alive + t * E : nullptr;
    double sum = 0, sum_sq = 0;
    int64_t n = 0;
    for (int64_t e = 0; e < E; ++e) {
      if (in != nullptr && !in[e]) continue;  // padding: not a return
      returns_[e] = returns_[e] * gamma_ + r[e];
      sum += returns_[e];
      ++n;
    }
    if (n > 0) {
      const double batch_mean = sum / n;
      for (int64_t e = 0; e < E; ++e) {
        if (in != nullptr && !in[e]) continue;
        const double d = returns_[e] - batch_mean;
        sum_sq += d * d;
      }
      // Parallel mean/variance update (Chan et al.).
      const double batch_var = sum_sq / n;
      const double total = count_ + n;
      const double delta = batch_mean - mean_;
      mean_ += delta * n / total;
      var_ =
          (var_ * count_ + batch_var * n + delta * delta * count_ * n / total) /
          total;
      count_ = total;
    }
    const float inv_std = static_cast<float>(1.0 / std::sqrt(var_ + 1e-8));
    const uint8_t* term = terminated + t * E;
    const uint8_t* trunc = truncated + t * E;
    for (int64_t e = 0; e < E; ++e) {
      r[e] *= inv_std;
      if (term[e] | trunc[e]) returns_[e] = 0;
    }
  }
}

std::vector<double> RewardScaler::SaveState() const {
  std::vector<double> state = returns_;
  state.push_back(mean_);
  state.push_back(var_);
  state.push_back(count_);
  return state;
}

bool RewardScaler::RestoreState(const std::vector<double>& state) {
  if (static_cast<int64_t>(state.size()) != num_envs_ + 3) return false;
  returns_.assign(state.begin(), state.begin() + num_envs_);
  mean_ = state[num_envs_];
  var_ = state[num_envs_ + 1];
  count_ = state[num_envs_ + 2];
  return true;
}

}  // namespace rl
