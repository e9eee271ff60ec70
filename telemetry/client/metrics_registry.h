// A process's Prometheus metrics: a thin facade over prometheus-cpp's core
// library (Debian's prometheus-cpp-dev) for what the mains need.
//
// Data flow: hot paths update prometheus::Counter / prometheus::Gauge objects
// (lock-free; pointers fetched once with GetCounter / GetGauge); a scrape of
// GET /metrics calls RenderText, which collects the prometheus::Registry and
// the callback families (queue depths and the like, read at that moment) and
// writes them with prometheus::TextSerializer.
//
// What the facade adds to prometheus-cpp, and why: callback families (the
// registry has only stored values), names fixed up instead of exceptions (a
// bad name must not take a server down), and one namespace for both kinds,
// so a name is never exported twice.
#ifndef RL_TELEMETRY_CLIENT_METRICS_REGISTRY_H_
#define RL_TELEMETRY_CLIENT_METRICS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace rl {

// Label name -> value pairs. Order does not matter: {a, b} and {b, a} name
// the same series. Of repeated label names the first is kept.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Samples a callback reports at scrape time: (labels, value) per series.
using MetricSamples = std::vector<std::pair<MetricLabels, double>>;

// The content type of the text exposition format 0.0.4.
inline constexpr char kPrometheusContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

class MetricsRegistry {
 public:
  // With the process metrics (see RegisterProcessMetrics) unless
  // `process_metrics` is false.
  explicit MetricsRegistry(bool process_metrics = true);
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Same name+labels returns the same object, valid as long as the
  // registry. Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and label names
  // [a-zA-Z_][a-zA-Z0-9_]*; a bad character is replaced with '_' (an empty
  // name becomes "_"). The first `help` given for a name is the one shown.
  // A name already used with another type (or by a callback), or one that
  // prometheus-cpp refuses (e.g. a reserved "__" prefix), is an error that
  // is logged; the returned object then works but is never exported.
  prometheus::Counter* GetCounter(const std::string& name,
                                  const std::string& help,
                                  const MetricLabels& labels = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  prometheus::Gauge* GetGauge(const std::string& name, const std::string& help,
                              const MetricLabels& labels = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // Adds a family whose samples `fn` returns at every scrape. `type` is
  // "gauge" or "counter" (anything else is exported as "untyped"). `fn` is
  // called without the registry's lock held, so it may use the registry; if
  // it throws, the family is exported without samples. Names are fixed as
  // for GetCounter; a name already in use is an error that is logged, and
  // the callback is dropped.
  void AddCallback(const std::string& name, const std::string& help,
                   const std::string& type, std::function<MetricSamples()> fn)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Every family (stored and callback), sorted by name.
  std::vector<prometheus::MetricFamily> Collect() const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Collect() in the text exposition format 0.0.4 (prometheus-cpp's
  // TextSerializer).
  std::string RenderText() const;

 private:
  enum class Kind { kCounter, kGauge, kCallback };
  struct Callback {
    std::string help;
    prometheus::MetricType type;
    std::shared_ptr<const std::function<MetricSamples()>> fn;
  };

  // True if `name` may be used for `kind` (unused, or used by that kind);
  // records it. Logs the conflict otherwise.
  bool Claim(const std::string& name, Kind kind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;
  std::map<std::string, Kind> kinds_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Callback> callbacks_ ABSL_GUARDED_BY(mu_);
  // Objects handed out for refused names: alive, never exported.
  std::vector<std::unique_ptr<prometheus::Counter>> orphan_counters_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<prometheus::Gauge>> orphan_gauges_
      ABSL_GUARDED_BY(mu_);
};

// Adds callbacks reading /proc/self: process_resident_memory_bytes,
// process_virtual_memory_bytes, process_cpu_seconds_total,
// process_start_time_seconds and process_open_fds (the names the official
// clients use). Called by the constructor.
void RegisterProcessMetrics(MetricsRegistry* registry);

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_METRICS_REGISTRY_H_
