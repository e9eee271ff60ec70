#include "telemetry/client/process_telemetry.h"

#include "common/logging.h"
#include "common/port_file.h"
#include "common/status.h"
#include "telemetry/client/grpc_transport.h"

namespace rl {

absl::StatusOr<std::unique_ptr<ProcessTelemetry>> ProcessTelemetry::Start(
    const ProcessTelemetryOptions& options) {
  auto t = std::unique_ptr<ProcessTelemetry>(new ProcessTelemetry());
  EmitterOptions emitter_options;
  emitter_options.source = options.source;
  t->emitter_ =
      MakeEmitter(options.telemetry_target, emitter_options, options.security);
  if (t->emitter_->enabled()) {
    RL_LOG_INFO("metrics go to telemetry at {} as {}", options.telemetry_target,
                options.source);
  }
  Emitter* emitter = t->emitter_.get();
  t->registry_.AddCallback(
      "telemetry_emitter_points_total",
      "Points this process emitted, by outcome.", "counter", [emitter]() {
        const EmitterStats s = emitter->stats();
        return MetricSamples{
            {{{"outcome", "accepted"}}, static_cast<double>(s.emitted)},
            {{{"outcome", "dropped"}}, static_cast<double>(s.dropped)},
            {{{"outcome", "acknowledged"}},
             static_cast<double>(s.acked_points)}};
      });
  t->registry_.AddCallback(
      "telemetry_emitter_unacked_points",
      "Points sent and not yet acknowledged.", "gauge", [emitter]() {
        return MetricSamples{
            {{}, static_cast<double>(emitter->stats().unacked_points)}};
      });
  if (options.metrics_port >= 0) {
    ASSIGN_OR_RETURN(
        t->http_,
        HttpEndpoint::Start(options.host, options.metrics_port, &t->registry_,
                            /*add_routes=*/nullptr, options.security));
    RL_LOG_INFO("Prometheus metrics on http://{}:{}/metrics", options.host,
                t->http_->port());
    RETURN_IF_ERROR(WritePortFile(options.metrics_port_file, t->http_->port()));
  }
  return t;
}

ProcessTelemetry::~ProcessTelemetry() {
  // No scrape reads the emitter while it winds down.
  if (http_ != nullptr) http_->Stop();
  if (emitter_ != nullptr && emitter_->enabled()) {
    const absl::Status flushed = emitter_->Flush(absl::Seconds(2));
    if (!flushed.ok()) RL_LOG_WARNING("{}", std::string(flushed.message()));
  }
}

}  // namespace rl
