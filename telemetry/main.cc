// telemetry: stores metrics from every component (TelemetryService.Ingest,
// acknowledged once durable), answers queries and live watches, writes
// TensorBoard event files per run, and serves a web page, a JSON API and
// Prometheus /metrics over HTTP.
//
//   telemetry_main --port=50052 --http_port=8080 --store=runs/telemetry.db
//       --tensorboard_dir=runs/tensorboard [--coordinator=127.0.0.1:50051]
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/prometheus.h"
#include "proto/coordinator.grpc.pb.h"
#include "telemetry/http_api.h"
#include "telemetry/telemetry_core.h"
#include "telemetry/telemetry_service.h"

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
ABSL_FLAG(double, retention_days, 0,
          "Delete runs with no new point for this many days; 0: keep.");
ABSL_FLAG(int64_t, max_points_per_series, 0,
          "Keep at most this many points per series (oldest go); 0: all.");
ABSL_FLAG(int, max_series_per_run, 10000, "Series per run, at most.");

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

// Run states from the coordinator, refreshed in the background.
class RunStatePoller {
 public:
  explicit RunStatePoller(const std::string& target)
      : stub_(rl::RunService::NewStub(rl::CreateChannel(target))),
        thread_([this] { Loop(); }) {}
  ~RunStatePoller() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  std::map<std::string, std::string> States() {
    absl::MutexLock lock(&mu_);
    return states_;
  }

 private:
  void Loop() {
    for (;;) {
      std::map<std::string, std::string> states;
      rl::ListRunsRequest request;
      request.set_page_size(1000);
      rl::ListRunsResponse response;
      auto context = rl::ContextWithDeadline(absl::Seconds(2));
      if (stub_->ListRuns(context.get(), request, &response).ok()) {
        for (const rl::Run& run : response.runs()) {
          states[run.run_id()] = rl::RunState_Name(run.state());
        }
      }
      absl::MutexLock lock(&mu_);
      if (!states.empty()) states_ = std::move(states);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Seconds(2))) {
        return;
      }
    }
  }

  std::unique_ptr<rl::RunService::Stub> stub_;
  absl::Mutex mu_;
  bool stop_ = false;
  std::map<std::string, std::string> states_;
  std::thread thread_;
};

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  rl::InitLogging("telemetry");
  const std::string store = absl::GetFlag(FLAGS_store);
  std::error_code ec;
  const auto parent = std::filesystem::path(store).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);

  rl::TelemetryCoreOptions options;
  options.store_path = store;
  options.tensorboard_dir = absl::GetFlag(FLAGS_tensorboard_dir);
  options.store.run_retention =
      absl::Hours(24) * absl::GetFlag(FLAGS_retention_days);
  options.store.max_points_per_series =
      absl::GetFlag(FLAGS_max_points_per_series);
  options.store.max_series_per_run = absl::GetFlag(FLAGS_max_series_per_run);
  auto core = rl::TelemetryCore::Create(options);
  if (!core.ok()) return Fail(core.status());

  rl::TelemetryServiceImpl service(core->get());
  rl::ServerOptions server_options;
  server_options.address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  server_options.max_receive_message_bytes = 64 << 20;
  server_options.max_send_message_bytes = 64 << 20;
  auto server = rl::StartServer({&service}, server_options);
  if (!server.ok()) return Fail(server.status());
  std::printf("telemetry listening on %s:%d\n",
              absl::GetFlag(FLAGS_host).c_str(), server->port);

  // Prometheus families over the core's counters.
  rl::MetricsRegistry& registry = rl::DefaultMetricsRegistry();
  rl::TelemetryCore* c = core->get();
  auto family = [&registry, c](const std::string& name, const std::string& help,
                               const std::string& type,
                               int64_t rl::TelemetryCoreStats::*field) {
    registry.AddCallback(name, help, type, [c, field]() {
      return rl::MetricSamples{{{}, static_cast<double>(c->stats().*field)}};
    });
  };
  using S = rl::TelemetryCoreStats;
  family("telemetry_stored_points_total", "Points stored durably.", "counter",
         &S::stored_points);
  family("telemetry_stored_batches_total", "Batches stored durably.", "counter",
         &S::stored_batches);
  family("telemetry_duplicate_batches_total",
         "Resent batches already stored (acknowledged, not stored again).",
         "counter", &S::duplicate_batches);
  family("telemetry_refused_batches_total", "Batches refused by the store.",
         "counter", &S::refused_batches);
  family("telemetry_transactions_total", "Store transactions (group commits).",
         "counter", &S::transactions);
  family("telemetry_queued_batches", "Batches waiting for the store.", "gauge",
         &S::queued_batches);
  family("telemetry_watchers", "Live Watch streams.", "gauge", &S::watchers);
  family("telemetry_tensorboard_points_total",
         "Points written to TensorBoard event files.", "counter",
         &S::tensorboard_points);

  std::unique_ptr<RunStatePoller> poller;
  if (!absl::GetFlag(FLAGS_coordinator).empty()) {
    poller = std::make_unique<RunStatePoller>(absl::GetFlag(FLAGS_coordinator));
  }
  std::unique_ptr<rl::HttpServer> http;
  if (absl::GetFlag(FLAGS_http_port) >= 0) {
    rl::RunStateSource states;
    if (poller != nullptr) states = [&poller]() { return poller->States(); };
    auto started = rl::StartMetricsServer(
        absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_http_port), &registry,
        rl::MakeTelemetryHttpRoutes(c, states));
    if (!started.ok()) return Fail(started.status());
    http = std::move(*started);
    std::printf("telemetry web page on http://%s:%d/ (metrics at /metrics)\n",
                absl::GetFlag(FLAGS_host).c_str(), http->port());
    if (absl::Status s = rl::WritePortFile(absl::GetFlag(FLAGS_http_port_file),
                                           http->port());
        !s.ok()) {
      return Fail(s);
    }
  }
  std::fflush(stdout);
  // The gRPC port file last: once it exists, everything is up.
  if (absl::Status s =
          rl::WritePortFile(absl::GetFlag(FLAGS_port_file), server->port);
      !s.ok()) {
    return Fail(s);
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  while (!g_stop) absl::SleepFor(absl::Milliseconds(100));
  RL_LOG_INFO("telemetry shutting down");
  // Shutdown is bounded: everything acknowledged is already durable, and
  // emitters resend the rest, so a stream that does not wind down in time
  // must not keep the process alive.
  std::thread([] {
    absl::SleepFor(absl::Seconds(10));
    RL_LOG_ERROR("telemetry shutdown took over 10 s; exiting now");
    std::fflush(nullptr);
    _exit(0);
  }).detach();
  server->server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  if (http != nullptr) http->Stop();
  poller.reset();
  core->reset();  // stores what is queued
  return 0;
}
