// Metrics in the Prometheus text exposition format 0.0.4, served over HTTP.
//
// Data flow: hot paths update Counter / Gauge objects (lock-free atomics,
// pointers fetched once from the registry); a scrape of GET /metrics calls
// MetricsRegistry::RenderText, which reads every metric and evaluates the
// callbacks (queue depths and the like) at that moment.
#ifndef RL_COMMON_PROMETHEUS_H_
#define RL_COMMON_PROMETHEUS_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/http_server.h"

namespace rl {

// Label name -> value pairs. Order does not matter: {a, b} and {b, a} name
// the same series, and labels are rendered sorted by name.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing value. Lock-free.
class Counter {
 public:
  // Negative and NaN increments are ignored: a counter never goes down.
  void Increment(double by = 1);
  double value() const;

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down. Lock-free.
class Gauge {
 public:
  void Set(double v);
  void Add(double by);
  double value() const;

 private:
  std::atomic<double> value_{0};
};

// Samples a callback reports at scrape time: (labels, value) per series.
using MetricSamples = std::vector<std::pair<MetricLabels, double>>;

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Same name+labels returns the same object, valid as long as the
  // registry. Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and label names
  // [a-zA-Z_][a-zA-Z0-9_]*; an invalid name is fixed by replacing each bad
  // character with '_' (an empty name becomes "_"). Of repeated label names
  // the first is kept. The first `help` given for a name is the one shown.
  // A name already used with another type (or by a callback) is an error
  // that is logged; the returned object then works but is never exported.
  Counter* GetCounter(const std::string& name, const std::string& help,
                      const MetricLabels& labels = {}) ABSL_LOCKS_EXCLUDED(mu_);
  Gauge* GetGauge(const std::string& name, const std::string& help,
                  const MetricLabels& labels = {}) ABSL_LOCKS_EXCLUDED(mu_);

  // Adds a family whose samples `fn` returns at every scrape (e.g. a queue
  // depth). `type` is "gauge" or "counter" (anything else is rendered as
  // "untyped"). `fn` is called without the registry's lock held, so it may
  // use the registry; if it throws, the family is rendered without samples.
  // Names are fixed as for GetCounter; a name already in use is an error
  // that is logged, and the callback is dropped.
  void AddCallback(const std::string& name, const std::string& help,
                   const std::string& type, std::function<MetricSamples()> fn)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The text exposition format 0.0.4: families sorted by name, "# HELP" and
  // "# TYPE" once per family, then its samples. Label values are escaped
  // (\\, \", \n), HELP text too (\\, \n). Values: whole numbers below 1e15
  // in plain digits, others as shortest round-trip decimals ("0.1",
  // "1e+21"), and NaN, +Inf, -Inf spelled as Prometheus does.
  std::string RenderText() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Type { kCounter, kGauge };
  struct Family {
    Type type;
    std::string help;
    // Keyed by the rendered label set ("{a=\"1\",b=\"2\"}").
    std::map<std::string, std::unique_ptr<Counter>> counters;
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
  };
  struct CallbackFamily {
    std::string help;
    std::string type;
    std::shared_ptr<const std::function<MetricSamples()>> fn;
  };

  // The family for `name`, created if new; nullptr if `name` is taken by a
  // family of another type or a callback.
  Family* FindOrAddFamily(const std::string& name, const std::string& help,
                          Type type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, CallbackFamily> callbacks_ ABSL_GUARDED_BY(mu_);
  // Objects handed out for conflicting names: alive, never rendered.
  std::vector<std::unique_ptr<Counter>> orphan_counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Gauge>> orphan_gauges_ ABSL_GUARDED_BY(mu_);
};

// The process-wide registry. Created on first use with the standard process
// metrics (see RegisterProcessMetrics); never destroyed.
MetricsRegistry& DefaultMetricsRegistry();

// Adds callbacks reading /proc/self: process_resident_memory_bytes,
// process_virtual_memory_bytes, process_cpu_seconds_total,
// process_start_time_seconds and process_open_fds. Call once per registry.
void RegisterProcessMetrics(MetricsRegistry* registry);

// The content type of the text exposition format 0.0.4.
inline constexpr char kPrometheusContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

// Starts an HttpServer on host:port serving GET /metrics (content type
// kPrometheusContentType) from `registry`, plus `extra_routes` (a
// "/metrics" among them is ignored). `registry` must outlive the server.
absl::StatusOr<std::unique_ptr<HttpServer>> StartMetricsServer(
    const std::string& host, int port, MetricsRegistry* registry,
    std::map<std::string, HttpHandler> extra_routes = {});

}  // namespace rl

#endif  // RL_COMMON_PROMETHEUS_H_
