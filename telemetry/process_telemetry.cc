#include "telemetry/process_telemetry.h"

#include "absl/flags/flag.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/status.h"
#include "telemetry/grpc_transport.h"

ABSL_FLAG(std::string, telemetry, "",
          "Telemetry service HOST:PORT to stream metrics to; empty: none.");
ABSL_FLAG(int, metrics_port, 0,
          "Prometheus /metrics port; 0 picks a free one, -1: off.");
ABSL_FLAG(std::string, metrics_port_file, "",
          "Write the bound /metrics port here.");

namespace rl {

absl::StatusOr<std::unique_ptr<ProcessTelemetry>>
ProcessTelemetry::StartFromFlags(const std::string& source,
                                 const std::string& host,
                                 const std::string& telemetry_target) {
  auto t = std::unique_ptr<ProcessTelemetry>(new ProcessTelemetry());
  EmitterOptions options;
  options.source = source;
  const std::string target = telemetry_target.empty()
                                 ? absl::GetFlag(FLAGS_telemetry)
                                 : telemetry_target;
  t->emitter_ = MakeEmitter(target, options);
  if (t->emitter_->enabled()) {
    RL_LOG_INFO("metrics go to telemetry at {} as {}", target, source);
  }
  MetricsRegistry& registry = DefaultMetricsRegistry();
  Emitter* emitter = t->emitter_.get();
  registry.AddCallback(
      "telemetry_emitter_points_total",
      "Points this process emitted, by outcome.", "counter", [emitter]() {
        const EmitterStats s = emitter->stats();
        return MetricSamples{
            {{{"outcome", "accepted"}}, static_cast<double>(s.emitted)},
            {{{"outcome", "dropped"}}, static_cast<double>(s.dropped)},
            {{{"outcome", "acknowledged"}},
             static_cast<double>(s.acked_points)}};
      });
  registry.AddCallback(
      "telemetry_emitter_unacked_points",
      "Points sent and not yet acknowledged.", "gauge", [emitter]() {
        return MetricSamples{
            {{}, static_cast<double>(emitter->stats().unacked_points)}};
      });
  const int port = absl::GetFlag(FLAGS_metrics_port);
  if (port >= 0) {
    ASSIGN_OR_RETURN(t->http_, StartMetricsServer(host, port, &registry));
    RL_LOG_INFO("Prometheus metrics on http://{}:{}/metrics", host,
                t->http_->port());
    RETURN_IF_ERROR(WritePortFile(absl::GetFlag(FLAGS_metrics_port_file),
                                  t->http_->port()));
  }
  return t;
}

ProcessTelemetry::~ProcessTelemetry() {
  if (emitter_ != nullptr && emitter_->enabled()) {
    const absl::Status flushed = emitter_->Flush(absl::Seconds(2));
    if (!flushed.ok()) RL_LOG_WARNING("{}", std::string(flushed.message()));
  }
  if (http_ != nullptr) http_->Stop();
}

}  // namespace rl
