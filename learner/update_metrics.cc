#include "learner/update_metrics.h"

#include <algorithm>

namespace rl {

void EmitUpdateMetrics(Emitter* e, int64_t step, const UpdateStats& stats,
                       double update_seconds, int64_t updates,
                       int grad_norm_interval, const MetricLabelList& labels) {
  if (e == nullptr || !e->enabled()) return;
  e->Emit("learner/policy_loss", step, stats.policy_loss, labels);
  e->Emit("learner/value_loss", step, stats.value_loss, labels);
  e->Emit("learner/entropy", step, stats.entropy, labels);
  e->Emit("learner/approx_kl", step, stats.approx_kl, labels);
  e->Emit("learner/clip_fraction", step, stats.clip_fraction, labels);
  e->Emit("learner/explained_variance", step, stats.explained_variance, labels);
  e->Emit("learner/learning_rate", step, stats.learning_rate, labels);
  e->Emit("learner/update_seconds", step, update_seconds, labels);
  // Skipped minibatches (loss or gradient NaN or inf): 0 in a healthy run.
  e->Emit("learner/nonfinite_minibatches", step,
          static_cast<double>(stats.nonfinite_minibatches), labels);
  if (updates % std::max(1, grad_norm_interval) == 0) {
    e->Emit("learner/grad_norm", step, stats.grad_norm, labels);
  }
}

}  // namespace rl
