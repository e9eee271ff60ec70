// telemetry: stores metrics from every component (TelemetryService.Ingest,
// acknowledged once durable), answers queries and live watches, writes
// TensorBoard event files per run, and serves a web page, a JSON API and
// Prometheus /metrics over HTTP.
//
//   telemetry_main --port=50052 --http_port=8080 --store=runs/telemetry.db
//       --tensorboard_dir=runs/tensorboard [--coordinator=127.0.0.1:50051]
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/notification.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "common/security_flags.h"
#include "common/signal_waiter.h"
#include "telemetry/telemetry_server.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 50052, "gRPC port (TelemetryService); 0 picks one.");
ABSL_FLAG(std::string, port_file, "", "Write the bound gRPC port here.");
ABSL_FLAG(int, http_port, 8080,
          "HTTP port (web page, /api, /metrics); 0 picks one, -1: off.");
ABSL_FLAG(std::string, http_port_file, "", "Write the bound HTTP port here.");
ABSL_FLAG(std::string, store, "runs/telemetry.db", "SQLite series file.");
ABSL_FLAG(std::string, tensorboard_dir, "runs/tensorboard",
          "Event files go to <dir>/<run id>/; empty: none.");
ABSL_FLAG(std::string, coordinator, "",
          "Coordinator address, for run states on the web page.");
ABSL_FLAG(double, retention_days, 90,
          "Delete runs with no new point for this many days; 0: keep.");
ABSL_FLAG(double, stream_retention_hours,
          absl::ToDoubleHours(rl::MetricStoreOptions().stream_retention),
          "Forget an emitter stream's stored sequence numbers (kept to spot "
          "resends) once it stored nothing for this many hours; 0: never.");
ABSL_FLAG(int64_t, max_points_per_series, 0,
          "Keep at most this many points per series (the oldest go, 1024 "
          "at a time); 0: all, else at least 1024.");
ABSL_FLAG(int, max_series_per_run, 10000, "Series per run, at most.");
ABSL_FLAG(int, max_series_per_source, 20000,
          "New series one source (process) may create, at most, while any "
          "of its streams is known (--stream_retention_hours); more are "
          "refused and counted. 0: no limit.");
// Limits on what clients can make the server hold; the defaults are the
// options' own.
ABSL_FLAG(int, max_runs, rl::MetricStoreOptions().max_runs,
          "Runs stored, at most; points of a new run beyond are refused.");
ABSL_FLAG(int, max_new_runs_per_source_per_minute,
          rl::MetricStoreOptions().max_new_runs_per_source_per_minute,
          "New runs one source (a process) may create a minute; its points "
          "of more are refused and counted. 0: no limit.");
ABSL_FLAG(int, max_ingest_batches,
          rl::TelemetryCoreOptions().max_ingest_batches,
          "Batches from all Ingest streams waiting for the store, at most.");
ABSL_FLAG(int64_t, max_ingest_bytes,
          rl::TelemetryCoreOptions().max_ingest_bytes,
          "Bytes of batches from all Ingest streams waiting for the store, "
          "at most.");
ABSL_FLAG(int, max_watchers, rl::TelemetryCoreOptions().max_watchers,
          "Live Watch streams, at most.");
ABSL_FLAG(int, max_ingest_streams,
          rl::TelemetryServiceOptions().max_ingest_streams,
          "Ingest streams open at once (one per emitting process); more are "
          "refused (RESOURCE_EXHAUSTED).");
ABSL_FLAG(int, max_ingest_streams_per_client,
          rl::TelemetryServiceOptions().max_ingest_streams_per_client,
          "Of those, at most this many from one client (its token's identity "
          "and its host).");
ABSL_FLAG(int64_t, max_watch_backlog_bytes,
          rl::TelemetryServiceOptions().max_watch_backlog_bytes,
          "Bytes a Watch client may leave unread before its stream ends.");
ABSL_FLAG(int, max_open_event_files,
          rl::TelemetryCoreOptions().max_open_event_files,
          "TensorBoard event files open at once (least recently written are "
          "closed, and appended to later).");

int main(int argc, char** argv) {
  rl::BlockStopSignals();
  rl::ParseCommandLineOrExit(
      argc, argv,
      "telemetry_main [--port=N] [--http_port=N] [--store=FILE] "
      "[--coordinator=HOST:PORT]");
  rl::InitLogging("telemetry");
  absl::StatusOr<std::shared_ptr<const rl::Security>> security =
      rl::SecurityFromFlags();
  if (!security.ok()) return rl::ExitCode(security.status());

  rl::TelemetryServerOptions options;
  options.security = *security;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  options.http_port = absl::GetFlag(FLAGS_http_port);
  options.http_port_file = absl::GetFlag(FLAGS_http_port_file);
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.core.store_path = absl::GetFlag(FLAGS_store);
  options.core.tensorboard_dir = absl::GetFlag(FLAGS_tensorboard_dir);
  options.core.store.run_retention =
      absl::Hours(24) * absl::GetFlag(FLAGS_retention_days);
  options.core.store.stream_retention =
      absl::Hours(absl::GetFlag(FLAGS_stream_retention_hours));
  options.core.store.max_points_per_series =
      absl::GetFlag(FLAGS_max_points_per_series);
  options.core.store.max_series_per_run =
      absl::GetFlag(FLAGS_max_series_per_run);
  options.core.store.max_series_per_source =
      absl::GetFlag(FLAGS_max_series_per_source);
  options.core.store.max_runs = absl::GetFlag(FLAGS_max_runs);
  options.core.store.max_new_runs_per_source_per_minute =
      absl::GetFlag(FLAGS_max_new_runs_per_source_per_minute);
  options.core.max_ingest_batches = absl::GetFlag(FLAGS_max_ingest_batches);
  options.core.max_ingest_bytes = absl::GetFlag(FLAGS_max_ingest_bytes);
  options.core.max_watchers = absl::GetFlag(FLAGS_max_watchers);
  options.core.max_open_event_files = absl::GetFlag(FLAGS_max_open_event_files);
  options.service.max_ingest_streams = absl::GetFlag(FLAGS_max_ingest_streams);
  options.service.max_ingest_streams_per_client =
      absl::GetFlag(FLAGS_max_ingest_streams_per_client);
  options.service.max_watch_backlog_bytes =
      absl::GetFlag(FLAGS_max_watch_backlog_bytes);

  auto server = rl::TelemetryServer::Create(options);
  // 2 for a bad flag (an off-loopback plaintext --host), 1 otherwise.
  if (!server.ok()) return rl::ExitCode(server.status());
  std::printf("telemetry listening on %s:%d\n", options.host.c_str(),
              (*server)->port());
  if ((*server)->http_port() > 0) {
    std::printf("telemetry web page on http://%s:%d/ (metrics at /metrics)\n",
                options.host.c_str(), (*server)->http_port());
  }
  std::fflush(stdout);

  while (rl::WaitForStopSignal(absl::InfiniteDuration()) == 0) {
  }
  RL_LOG_INFO("telemetry shutting down");
  // Shutdown is bounded: everything acknowledged is already durable, and
  // emitters resend the rest, so a stream that does not wind down in time
  // must not keep the process alive.
  absl::Notification stopped;
  std::thread watchdog([&stopped] {
    if (!stopped.WaitForNotificationWithTimeout(absl::Seconds(10))) {
      RL_LOG_ERROR("telemetry shutdown took over 10 s; exiting now");
      std::fflush(nullptr);
      _exit(0);
    }
  });
  server->reset();  // stores what is queued
  stopped.Notify();
  watchdog.join();
  return 0;
}
