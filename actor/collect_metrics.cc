#include "actor/collect_metrics.h"

#include <algorithm>

namespace rl {

int64_t CollectMetricsStep(int64_t previous_step, int64_t policy_env_steps,
                           int64_t segment_steps) {
  return std::max(previous_step, policy_env_steps) + segment_steps;
}

void EmitCollectMetrics(Emitter* e, int64_t step, int64_t segment_steps,
                        double segment_seconds, const CollectTimings& timings,
                        const std::vector<float>& episode_returns,
                        const std::vector<int32_t>& episode_lengths,
                        const MetricLabelList& labels) {
  if (e == nullptr || !e->enabled()) return;
  e->Emit("actor/env_steps_per_second", step,
          segment_seconds > 0
              ? static_cast<double>(segment_steps) / segment_seconds
              : 0,
          labels);
  e->Emit("actor/inference_seconds", step, timings.inference_seconds, labels);
  e->Emit("actor/env_seconds", step, timings.env_seconds, labels);
  EmitEpisodeMetrics(e, step, episode_returns, episode_lengths, labels);
}

void EmitEpisodeMetrics(Emitter* e, int64_t step,
                        const std::vector<float>& episode_returns,
                        const std::vector<int32_t>& episode_lengths,
                        const MetricLabelList& labels) {
  if (e == nullptr || !e->enabled()) return;
  for (size_t i = 0; i < episode_returns.size(); ++i) {
    e->Emit("actor/episode_return", step, episode_returns[i], labels);
    if (i < episode_lengths.size()) {
      e->Emit("actor/episode_length", step, episode_lengths[i], labels);
    }
  }
}

}  // namespace rl
