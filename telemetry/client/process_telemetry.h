// Telemetry for a server process in one call: the emitter streaming to the
// telemetry service (disabled without a target) and the Prometheus /metrics
// endpoint (0: a free port, logged and written to the port file; -1: off),
// with the emitter's own counters (points emitted, dropped, acknowledged,
// unacknowledged) and the process metrics among the exported families.
//
// No flags here: each main defines its own and fills the options.
#ifndef RL_TELEMETRY_CLIENT_PROCESS_TELEMETRY_H_
#define RL_TELEMETRY_CLIENT_PROCESS_TELEMETRY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/security.h"
#include "telemetry/client/emitter.h"
#include "telemetry/client/http_endpoint.h"
#include "telemetry/client/metrics_registry.h"

namespace rl {

struct ProcessTelemetryOptions {
  // This component in the series, e.g. "learner/0".
  std::string source;
  // Where /metrics listens.
  std::string host = "127.0.0.1";
  // HOST:PORT of the telemetry service; "" = emitter disabled.
  std::string telemetry_target;
  // 0: a free port; -1: off.
  int metrics_port = 0;
  // The bound port is written here if set.
  std::string metrics_port_file;
  // The process's credentials: the emitter's channel and the doors of
  // /metrics (null: Security::ProcessDefault()).
  std::shared_ptr<const Security> security;
};

class ProcessTelemetry {
 public:
  // Fails only if the metrics port cannot be bound or its port file cannot
  // be written.
  static absl::StatusOr<std::unique_ptr<ProcessTelemetry>> Start(
      const ProcessTelemetryOptions& options);
  // Stops the endpoint and flushes the emitter (up to 2 s).
  ~ProcessTelemetry();

  Emitter* emitter() { return emitter_.get(); }
  // This process's families; callbacks added here are exported at once.
  MetricsRegistry* registry() { return &registry_; }
  // 0 when the endpoint is off.
  int metrics_port() const { return http_ ? http_->port() : 0; }

 private:
  ProcessTelemetry() = default;

  MetricsRegistry registry_;
  std::unique_ptr<Emitter> emitter_;
  std::unique_ptr<HttpEndpoint> http_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_PROCESS_TELEMETRY_H_
