// Telemetry for a server process in one call: the emitter streaming to
// --telemetry (disabled when empty) and the Prometheus /metrics endpoint on
// --metrics_port (0: a free port, logged and written to --metrics_port_file;
// -1: off), with the emitter's own counters (points emitted, dropped,
// unacknowledged) among the exported families.
//
// Flags (defined here, shared by every binary linking this library):
//   --telemetry=HOST:PORT  --metrics_port=N  --metrics_port_file=PATH
#ifndef RL_TELEMETRY_PROCESS_TELEMETRY_H_
#define RL_TELEMETRY_PROCESS_TELEMETRY_H_

#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "common/http_server.h"
#include "common/prometheus.h"
#include "telemetry/emitter.h"

ABSL_DECLARE_FLAG(std::string, telemetry);
ABSL_DECLARE_FLAG(int, metrics_port);
ABSL_DECLARE_FLAG(std::string, metrics_port_file);

namespace rl {

class ProcessTelemetry {
 public:
  // `source`: this component's name in the series, e.g. "learner/0".
  // Fails only if the metrics port cannot be bound.
  // `telemetry_target` non-empty: used instead of --telemetry.
  static absl::StatusOr<std::unique_ptr<ProcessTelemetry>> StartFromFlags(
      const std::string& source, const std::string& host = "127.0.0.1",
      const std::string& telemetry_target = "");
  // Flushes the emitter (up to 2 s) and stops the endpoint.
  ~ProcessTelemetry();

  Emitter* emitter() { return emitter_.get(); }
  MetricsRegistry* registry() { return &DefaultMetricsRegistry(); }
  // 0 when the endpoint is off.
  int metrics_port() const { return http_ ? http_->port() : 0; }

 private:
  ProcessTelemetry() = default;
  std::unique_ptr<Emitter> emitter_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_PROCESS_TELEMETRY_H_
