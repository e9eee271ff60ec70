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
// multiple of `grad_norm_interval`; each with `labels` (a run's several
// policies: {"policy", name}). Never blocks.
void EmitUpdateMetrics(Emitter* emitter, int64_t step, const UpdateStats& stats,
                       double update_seconds, int64_t updates,
                       int grad_norm_interval,
                       const MetricLabelList& labels = {});

}  // namespace rl

#endif  // RL_LEARNER_UPDATE_METRICS_H_
