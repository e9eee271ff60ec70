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
//
// An entry gives either one `value` or, for a figure kept per label (runs
// by state, refusals by reason), `labelled` samples. A process-wide table
// (the coordinator's, telemetry's own) is registered with
// RegisterProcessMetricTable: its samples carry no run label.
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
  // Instead of `value`: one sample per label set.
  std::function<MetricSamples(const Figures&)> labelled = nullptr;
};

namespace metric_table_internal {

// The entry's samples now: `labelled`'s, or `value`'s unlabelled (none
// when NaN).
template <typename Figures>
MetricSamples SamplesOf(const MetricEntry<Figures>& m, const Figures& f) {
  if (m.labelled) return m.labelled(f);
  const double v = m.value(f);
  if (std::isnan(v)) return {};
  return {{{}, v}};
}

}  // namespace metric_table_internal

// Emits every entry with a series at `step`.
template <typename Figures>
void EmitMetricTable(Emitter* emitter, int64_t step,
                     const std::vector<MetricEntry<Figures>>& table,
                     const Figures& figures) {
  if (emitter == nullptr || !emitter->enabled()) return;
  for (const MetricEntry<Figures>& m : table) {
    if (m.series == nullptr) continue;
    for (const auto& [labels, value] :
         metric_table_internal::SamplesOf(m, figures)) {
      if (std::isnan(value)) continue;
      if (labels.empty()) {
        emitter->Emit(m.series, step, value);
      } else {
        emitter->Emit(m.series, step, value, labels);
      }
    }
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
    registry->AddCallback(m.family, m.help, m.type, [m, sample]() {
      const std::optional<std::pair<std::string, Figures>> now = sample();
      if (!now) return MetricSamples{};
      MetricSamples out;
      for (auto& [labels, v] :
           metric_table_internal::SamplesOf(m, now->second)) {
        if (std::isnan(v)) continue;
        labels.insert(labels.begin(), {"run", now->first});
        out.push_back({std::move(labels), v});
      }
      return out;
    });
  }
}

// Registers every entry with a family, sampled from `figures` at each
// scrape, without a run label: for a process's own figures.
template <typename Figures>
void RegisterProcessMetricTable(MetricsRegistry* registry,
                                const std::vector<MetricEntry<Figures>>& table,
                                std::function<Figures()> figures) {
  for (const MetricEntry<Figures>& m : table) {
    if (m.family == nullptr) continue;
    registry->AddCallback(m.family, m.help, m.type, [m, figures]() {
      MetricSamples out;
      for (auto& sample : metric_table_internal::SamplesOf(m, figures())) {
        if (!std::isnan(sample.second)) out.push_back(std::move(sample));
      }
      return out;
    });
  }
}

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_METRIC_TABLE_H_
