// The learner's metric-name table (telemetry/client/metric_table.h): every
// figure of a learner once, with the telemetry series it is emitted as
// after each update ("learner/...", step = env steps) and the Prometheus
// family its /metrics exports ("learner_...", labelled with the run).
// The losses of an update are update_metrics.h's (shared with rl_local).
#ifndef RL_LEARNER_LEARNER_METRICS_H_
#define RL_LEARNER_LEARNER_METRICS_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "proto/learner.pb.h"
#include "telemetry/client/metric_table.h"

namespace rl {

// What the figures are read from: the learner's status and, after an
// update (telemetry only), the update's own figures.
struct LearnerFigures {
  LearnerStatus status;
  // Mean versions behind of the update's segments.
  double mean_policy_lag = std::nan("");
  double queue_depth = std::nan("");
  double segments_per_update = std::nan("");
  double nonfinite_updates = std::nan("");
};

const std::vector<MetricEntry<LearnerFigures>>& LearnerMetricTable();

// After each update: "learner/steps_per_second", "policy_lag",
// "queue_depth", "segments_per_update", "segments_dropped_stale",
// "policy_version", "connected_actors", "nonfinite_updates" and, once
// episodes ended, "mean_return". Never blocks.
inline void EmitLearnerFigures(Emitter* emitter, int64_t step,
                               const LearnerFigures& figures) {
  EmitMetricTable(emitter, step, LearnerMetricTable(), figures);
}

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_METRICS_H_
