// The metrics of one PPO update, as the learner and the one-process trainer
// both emit them (names "learner/...", step = env steps so far).
#ifndef RL_LEARNER_UPDATE_METRICS_H_
#define RL_LEARNER_UPDATE_METRICS_H_

#include <cstdint>

#include "learner/ppo_updater.h"
#include "telemetry/client/emitter.h"

namespace rl {

// Losses, entropy, KL, clip fraction, explained variance, learning rate,
// update time and the minibatches skipped as non-finite
// ("learner/nonfinite_minibatches"); the gradient norm when `updates` is a
// multiple of `grad_norm_interval`. Never blocks.
void EmitUpdateMetrics(Emitter* emitter, int64_t step, const UpdateStats& stats,
                       double update_seconds, int64_t updates,
                       int grad_norm_interval);

// What the distributed learner adds after each update: its queue and
// stream figures ("learner/steps_per_second", "policy_lag" (mean versions
// behind of the update's segments), "queue_depth", "segments_per_update",
// "segments_dropped_stale", "policy_version", "connected_actors",
// "nonfinite_updates" and, once episodes ended, "mean_return").
struct LearnerUpdateFigures {
  double steps_per_second = 0;
  double mean_policy_lag = 0;
  int64_t queue_depth = 0;
  int64_t segments = 0;
  int64_t segments_dropped_stale = 0;
  int64_t policy_version = 0;
  int64_t connected_actors = 0;
  int64_t nonfinite_updates = 0;
  bool has_mean_return = false;
  double mean_return = 0;
};
void EmitLearnerUpdateFigures(Emitter* emitter, int64_t step,
                              const LearnerUpdateFigures& figures);

}  // namespace rl

#endif  // RL_LEARNER_UPDATE_METRICS_H_
