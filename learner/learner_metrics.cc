#include "learner/learner_metrics.h"

namespace rl {

const std::vector<MetricEntry<LearnerFigures>>& LearnerMetricTable() {
  using F = LearnerFigures;
  static const auto* table = new std::vector<MetricEntry<F>>{
      {nullptr, "learner_env_steps_total", "Environment steps trained on.",
       "counter", [](const F& f) { return double(f.status.env_steps()); }},
      {nullptr, "learner_updates_total", "PPO updates.", "counter",
       [](const F& f) { return double(f.status.updates()); }},
      {"learner/policy_version", "learner_policy_version",
       "Current policy version.", "gauge",
       [](const F& f) { return double(f.status.policy_version()); }},
      {"learner/steps_per_second", "learner_steps_per_second",
       "Training throughput.", "gauge",
       [](const F& f) { return f.status.progress().steps_per_second(); }},
      {"learner/connected_actors", "learner_connected_actors",
       "Actors streaming rollouts.", "gauge",
       [](const F& f) { return double(f.status.connected_actors()); }},
      {nullptr, "learner_segments_received_total", "Rollout segments received.",
       "counter",
       [](const F& f) { return double(f.status.segments_received()); }},
      {nullptr, "learner_segments_rejected_total",
       "Malformed segments refused.", "counter",
       [](const F& f) { return double(f.status.segments_rejected()); }},
      {"learner/segments_dropped_stale", "learner_segments_dropped_stale_total",
       "Segments dropped for policy lag.", "counter",
       [](const F& f) { return double(f.status.segments_dropped_stale()); }},
      // NaN (left out) until an episode ended.
      {"learner/mean_return", nullptr, nullptr, nullptr,
       [](const F& f) { return f.status.progress().mean_return(); }},
      {"learner/policy_lag", nullptr, nullptr, nullptr,
       [](const F& f) { return f.mean_policy_lag; }},
      {"learner/queue_depth", nullptr, nullptr, nullptr,
       [](const F& f) { return f.queue_depth; }},
      {"learner/segments_per_update", nullptr, nullptr, nullptr,
       [](const F& f) { return f.segments_per_update; }},
      {"learner/nonfinite_updates", nullptr, nullptr, nullptr,
       [](const F& f) { return f.nonfinite_updates; }},
  };
  return *table;
}

}  // namespace rl
