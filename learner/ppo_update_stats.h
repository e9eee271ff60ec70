// What one PPO update reports (PpoUpdater::Update, learner/ppo_updater.h).
// Part of the ppo_updater library.
#ifndef RL_LEARNER_PPO_UPDATE_STATS_H_
#define RL_LEARNER_PPO_UPDATE_STATS_H_

#include <cstdint>

namespace rl {

// Reported per update.
struct UpdateStats {
  double policy_loss = 0;
  double value_loss = 0;
  double entropy = 0;
  double approx_kl = 0;
  double clip_fraction = 0;
  double explained_variance = 0;
  double grad_norm = 0;
  double learning_rate = 0;
  int epochs = 0;          // epochs run (fewer than configured after a KL stop)
  double gae_seconds = 0;  // wall time of the advantage computation
  // Minibatches whose loss or gradient was NaN or inf: their gradients were
  // not applied, and the observation statistics were not updated (the
  // losses and gradient norm above include them, so they are not finite).
  int64_t nonfinite_minibatches = 0;
  // Updates in a row, this one included, with such minibatches.
  int consecutive_nonfinite_updates = 0;
};

}  // namespace rl

#endif  // RL_LEARNER_PPO_UPDATE_STATS_H_
