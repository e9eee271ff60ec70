// The metrics of one collected segment, as actors and the one-process
// trainer both emit them (names "actor/...", labelled with the actor).
#ifndef RL_ACTOR_COLLECT_METRICS_H_
#define RL_ACTOR_COLLECT_METRICS_H_

#include <cstdint>
#include <vector>

#include "actor/rollout_collector.h"
#include "telemetry/client/emitter.h"

namespace rl {

// The step an actor's segment metrics go at, on the run's axis: the global
// env steps of the policy that collected the segment (as the learner
// published them) plus the segment, and never below this actor's previous
// step plus the segment. A restarted or reassigned actor thus continues the
// run's curve instead of folding it back to 0.
int64_t CollectMetricsStep(int64_t previous_step, int64_t policy_env_steps,
                           int64_t segment_steps);

// Env steps/s over the segment, inference and env time, and each finished
// episode's return and length. `step`: env steps of this actor so far.
void EmitCollectMetrics(Emitter* emitter, int64_t step, int64_t segment_steps,
                        double segment_seconds, const CollectTimings& timings,
                        const std::vector<float>& episode_returns,
                        const std::vector<int32_t>& episode_lengths,
                        const MetricLabelList& labels);

// Only the episodes' returns and lengths ("actor/episode_return",
// "actor/episode_length"): a run's several policies, each with its label.
void EmitEpisodeMetrics(Emitter* emitter, int64_t step,
                        const std::vector<float>& episode_returns,
                        const std::vector<int32_t>& episode_lengths,
                        const MetricLabelList& labels);

}  // namespace rl

#endif  // RL_ACTOR_COLLECT_METRICS_H_
