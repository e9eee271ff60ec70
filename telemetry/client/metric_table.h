// A component's metric-name table: each figure named once, with the
// telemetry series it is emitted as and the Prometheus family /metrics
// exports it as (either may be absent), read from one struct of figures.
// The learner's is learner/learner_metrics.h, the actor's in
// actor/actor_process.cc.
//
//   const std::vector<MetricEntry<Status>> kTable = {
//       {"learner/policy_version", "learner_policy_version",
//        "Current policy version.", "gauge",
//        [](const Status& s) { return double(s.policy_version()); }},
//   };
//   EmitMetricTable(emitter, step, kTable, status);        // the series
//   RegisterMetricTable(registry, kTable, sample_of_run);  // the families
#ifndef RL_TELEMETRY_CLIENT_METRIC_TABLE_H_
#define RL_TELEMETRY_CLIENT_METRIC_TABLE_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "telemetry/client/emitter.h"
#include "telemetry/client/metrics_registry.h"

namespace rl {

template <typename Figures>
struct MetricEntry {
  const char* series;  // telemetry series; null: /metrics only
  const char* family;  // Prometheus family; null: telemetry only
  const char* help;    // of the family
  const char* type;    // of the family: "counter" or "gauge"
  // The figure; NaN: none this time (nothing emitted or exported).
  std::function<double(const Figures&)> value;
};

// Emits every entry with a series at `step`.
template <typename Figures>
void EmitMetricTable(Emitter* emitter, int64_t step,
                     const std::vector<MetricEntry<Figures>>& table,
                     const Figures& figures) {
  if (emitter == nullptr || !emitter->enabled()) return;
  for (const MetricEntry<Figures>& m : table) {
    if (m.series == nullptr) continue;
    const double value = m.value(figures);
    if (!std::isnan(value)) emitter->Emit(m.series, step, value);
  }
}

// The figures of the run a process works on now, with the run's id;
// nullopt when it works on none.
template <typename Figures>
using RunFigures =
    std::function<std::optional<std::pair<std::string, Figures>>()>;

// Registers every entry with a family: one sample labelled {run: <id>},
// read from `sample` at each scrape (none while there is no run).
template <typename Figures>
void RegisterMetricTable(MetricsRegistry* registry,
                         const std::vector<MetricEntry<Figures>>& table,
                         RunFigures<Figures> sample) {
  for (const MetricEntry<Figures>& m : table) {
    if (m.family == nullptr) continue;
    registry->AddCallback(
        m.family, m.help, m.type, [value = m.value, sample]() {
          const std::optional<std::pair<std::string, Figures>> now = sample();
          if (!now) return MetricSamples{};
          const double v = value(now->second);
          if (std::isnan(v)) return MetricSamples{};
          return MetricSamples{{{{"run", now->first}}, v}};
        });
  }
}

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_METRIC_TABLE_H_
