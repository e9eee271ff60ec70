#include "telemetry/telemetry_server.h"

#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/status.h"
#include "common/thread.h"
#include "google/protobuf/util/json_util.h"
#include "proto/coordinator.grpc.pb.h"
#include "telemetry/client/http_endpoint.h"
#include "telemetry/client/metric_table.h"
#include "telemetry/client/metrics_registry.h"
#include "telemetry/http_api.h"
#include "telemetry/telemetry_service.h"

namespace rl {
namespace {

// Run states and sweeps from the coordinator, refreshed every 2 s on a
// thread of its own, so a page load never waits for the coordinator (one
// run's details are asked for when the page shows it).
class RunStatePoller {
 public:
  // `on_sweeps` sees every poll's sweeps (on the poller's thread).
  RunStatePoller(const std::string& target,
                 std::shared_ptr<const Security> security,
                 std::function<void(const ListSweepsResponse&)> on_sweeps)
      : stub_(RunService::NewStub(CreateChannel(target, std::move(security)))),
        on_sweeps_(std::move(on_sweeps)),
        thread_(StartThread("telemetry-tick", [this] { Loop(); })) {}
  ~RunStatePoller() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  std::map<std::string, std::string> States() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return states_;
  }
  ListSweepsResponse Sweeps() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return sweeps_;
  }
  absl::StatusOr<Run> GetRun(const std::string& run_id) {
    GetRunRequest request;
    request.set_run_id(run_id);
    request.set_with_history(true);
    Run run;
    auto context = ContextWithDeadline(absl::Seconds(2));
    const grpc::Status status = stub_->GetRun(context.get(), request, &run);
    if (!status.ok()) return FromGrpcStatus(status);
    return run;
  }

 private:
  void Loop() {
    for (;;) {
      std::map<std::string, std::string> states;
      ListRunsRequest request;
      request.set_page_size(1000);
      ListRunsResponse response;
      auto context = ContextWithDeadline(absl::Seconds(2));
      if (stub_->ListRuns(context.get(), request, &response).ok()) {
        for (const Run& run : response.runs()) {
          states[run.run_id()] = RunState_Name(run.state());
        }
      }
      ListSweepsResponse sweeps;
      auto sweeps_context = ContextWithDeadline(absl::Seconds(2));
      const bool got_sweeps =
          stub_->ListSweeps(sweeps_context.get(), ListSweepsRequest(), &sweeps)
              .ok();
      if (got_sweeps && on_sweeps_) on_sweeps_(sweeps);
      absl::MutexLock lock(&mu_);
      if (!states.empty()) states_ = std::move(states);
      if (got_sweeps) sweeps_ = std::move(sweeps);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Seconds(2))) {
        return;
      }
    }
  }

  std::unique_ptr<RunService::Stub> stub_;
  const std::function<void(const ListSweepsResponse&)> on_sweeps_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::string> states_ ABSL_GUARDED_BY(mu_);
  ListSweepsResponse sweeps_ ABSL_GUARDED_BY(mu_);
  NamedThread thread_;
};

// TensorBoard's HParams dashboard: each sweep trial's parameters, once per
// run (`written`), grouped by configuration. Lists (policy.hidden_sizes)
// become their JSON text: HParams takes numbers, strings and bools.
void WriteTrialHParams(const ListSweepsResponse& sweeps, TelemetryCore* core,
                       std::set<std::string>* written) {
  for (const Sweep& sweep : sweeps.sweeps()) {
    for (const Trial& trial : sweep.trials()) {
      if (trial.run_id().empty() || written->count(trial.run_id())) continue;
      std::map<std::string, google::protobuf::Value> hparams;
      for (const auto& [path, value] : trial.parameters()) {
        google::protobuf::Value& v = hparams[path];
        if (value.has_list_value() || value.has_struct_value()) {
          std::string json;
          (void)google::protobuf::util::MessageToJsonString(value, &json);
          v.set_string_value(json);
        } else {
          v = value;
        }
      }
      hparams["sweep"].set_string_value(sweep.sweep_id());
      hparams["seed_offset"].set_number_value(trial.seed_offset());
      core->AddRunHParams(
          trial.run_id(), std::move(hparams),
          absl::StrCat(sweep.sweep_id(), "/config-", trial.config()));
      written->insert(trial.run_id());
    }
  }
}

// Telemetry's own figures: the core's counters and the service's.
struct TelemetryFigures {
  TelemetryCoreStats core;
  int64_t ingest_streams = 0;
  int64_t refused_ingest_streams = 0;
  int64_t refused_ingest_streams_per_client = 0;
  int64_t watch_backlog_bytes = 0;
};

// Telemetry's metric-name table (see telemetry/client/metric_table.h):
// Prometheus families only (its own figures are not stored as series).
const std::vector<MetricEntry<TelemetryFigures>>& TelemetryMetricTable() {
  using F = TelemetryFigures;
  auto core = [](int64_t TelemetryCoreStats::*field) {
    return [field](const F& f) { return static_cast<double>(f.core.*field); };
  };
  using S = TelemetryCoreStats;
  static const auto* table = new std::vector<MetricEntry<F>>{
      {nullptr, "telemetry_stored_points_total", "Points stored durably.",
       "counter", core(&S::stored_points)},
      {nullptr, "telemetry_stored_batches_total", "Batches stored durably.",
       "counter", core(&S::stored_batches)},
      {nullptr, "telemetry_duplicate_batches_total",
       "Resent batches already stored (acknowledged, not stored again).",
       "counter", core(&S::duplicate_batches)},
      {nullptr, "telemetry_refused_batches_total",
       "Batches refused by the store.", "counter", core(&S::refused_batches)},
      {nullptr, "telemetry_transactions_total",
       "Store transactions (group commits).", "counter",
       core(&S::transactions)},
      {nullptr, "telemetry_queued_batches", "Batches waiting for the store.",
       "gauge", core(&S::queued_batches)},
      {nullptr, "telemetry_watchers", "Live Watch streams.", "gauge",
       core(&S::watchers)},
      {nullptr, "telemetry_tensorboard_points_total",
       "Points written to TensorBoard event files.", "counter",
       core(&S::tensorboard_points)},
      {nullptr, "telemetry_tensorboard_dropped_points_total",
       "Points not written to event files: their backlog was full.", "counter",
       core(&S::tensorboard_dropped_points)},
      {nullptr, "telemetry_open_event_files", "TensorBoard event files open.",
       "gauge", core(&S::open_event_files)},
      {nullptr, "telemetry_in_flight_batches",
       "Batches from all streams submitted and not yet stored.", "gauge",
       core(&S::in_flight_batches)},
      {nullptr, "telemetry_in_flight_bytes",
       "Serialized bytes of the batches in flight.", "gauge",
       core(&S::in_flight_bytes)},
      {nullptr, "telemetry_refused_total",
       "Requests refused by a limit, by reason: ingest_budget "
       "(max_ingest_batches/bytes), watchers (max_watchers), watch_backlog "
       "(max_watch_backlog_bytes), series_per_run (max_series_per_run), runs "
       "(max_runs), runs_per_source (max_new_runs_per_source_per_minute).",
       "counter", nullptr,
       [](const F& f) {
         const S& s = f.core;
         MetricSamples samples;
         for (const auto& [reason, value] :
              {std::pair<const char*, int64_t>{"ingest_budget",
                                               s.refused_ingest_budget},
               {"watchers", s.refused_watchers},
               {"watch_backlog", s.refused_watch_backlog},
               {"series_per_run", s.refused_series_per_run},
               {"series_per_source", s.refused_series_per_source},
               {"runs", s.refused_runs},
               {"runs_per_source", s.refused_runs_per_source}}) {
           samples.push_back(
               {{{"reason", reason}}, static_cast<double>(value)});
         }
         return samples;
       }},
      {nullptr, "telemetry_ingest_streams", "Open ingest streams.", "gauge",
       [](const F& f) { return static_cast<double>(f.ingest_streams); }},
      {nullptr, "telemetry_refused_ingest_streams_total",
       "Ingest streams refused: limit=\"total\" by --max_ingest_streams, "
       "limit=\"per_client\" by --max_ingest_streams_per_client.",
       "counter", nullptr,
       [](const F& f) {
         return MetricSamples{
             {{{"limit", "total"}},
              static_cast<double>(f.refused_ingest_streams)},
             {{{"limit", "per_client"}},
              static_cast<double>(f.refused_ingest_streams_per_client)}};
       }},
      {nullptr, "telemetry_watch_backlog_bytes",
       "Bytes of points queued for Watch clients that have not read them.",
       "gauge",
       [](const F& f) { return static_cast<double>(f.watch_backlog_bytes); }},
  };
  return *table;
}

void RegisterCoreMetrics(TelemetryCore* core,
                         const TelemetryServiceImpl* service,
                         MetricsRegistry* registry) {
  RegisterProcessMetricTable<TelemetryFigures>(
      registry, TelemetryMetricTable(), [core, service] {
        TelemetryFigures f;
        f.core = core->stats();
        f.ingest_streams = service->open_ingest_streams();
        f.refused_ingest_streams = service->refused_ingest_streams();
        f.refused_ingest_streams_per_client =
            service->refused_ingest_streams_per_client();
        f.watch_backlog_bytes = service->watch_backlog_bytes();
        return f;
      });
}

}  // namespace

// Members in start order; destroyed in reverse, servers before the core.
struct TelemetryServer::Impl {
  MetricsRegistry registry;
  std::unique_ptr<TelemetryCore> core;
  std::unique_ptr<TelemetryServiceImpl> service;
  RunningServer grpc;
  std::unique_ptr<RunStatePoller> poller;
  std::unique_ptr<HttpEndpoint> http;

  ~Impl() {
    if (grpc.server != nullptr) {
      grpc.server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    }
    if (http != nullptr) http->Stop();
  }
};

absl::StatusOr<std::unique_ptr<TelemetryServer>> TelemetryServer::Create(
    const TelemetryServerOptions& options) {
  if (options.service.max_ingest_streams < 1 ||
      options.service.max_ingest_streams_per_client < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_ingest_streams and --max_ingest_streams_per_client: must be "
        ">= 1 (got ",
        options.service.max_ingest_streams, " and ",
        options.service.max_ingest_streams_per_client, ")"));
  }
  auto impl = std::make_unique<Impl>();
  const auto parent =
      std::filesystem::path(options.core.store_path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }
  ASSIGN_OR_RETURN(impl->core, TelemetryCore::Create(options.core));
  impl->service = std::make_unique<TelemetryServiceImpl>(
      impl->core.get(), options.service, options.security);
  RegisterCoreMetrics(impl->core.get(), impl->service.get(), &impl->registry);

  ServerOptions server_options;
  server_options.security = options.security;
  server_options.address = absl::StrCat(options.host, ":", options.port);
  server_options.max_receive_message_bytes = 64 << 20;
  server_options.max_send_message_bytes = 64 << 20;
  ASSIGN_OR_RETURN(impl->grpc,
                   StartServer({impl->service.get()}, server_options));

  if (!options.coordinator.empty()) {
    impl->poller = std::make_unique<RunStatePoller>(
        options.coordinator, options.security,
        [core = impl->core.get(), written = std::set<std::string>()](
            const ListSweepsResponse& sweeps) mutable {
          WriteTrialHParams(sweeps, core, &written);
        });
  }
  if (options.http_port >= 0) {
    RunStateSource states;
    SweepSource sweeps;
    RunSource run;
    if (impl->poller != nullptr) {
      RunStatePoller* poller = impl->poller.get();
      states = [poller] { return poller->States(); };
      sweeps = [poller] { return poller->Sweeps(); };
      run = [poller](const std::string& id) { return poller->GetRun(id); };
    }
    TelemetryCore* core = impl->core.get();
    ASSIGN_OR_RETURN(
        impl->http,
        HttpEndpoint::Start(
            options.host, options.http_port, &impl->registry,
            [core, &states, &sweeps, &run](httplib::Server* server) {
              AddTelemetryHttpRoutes(core, states, server, sweeps, run);
            },
            options.security));
    RETURN_IF_ERROR(WritePortFile(options.http_port_file, impl->http->port()));
  }
  // The gRPC port file last: once it exists, everything is up.
  RETURN_IF_ERROR(WritePortFile(options.port_file, impl->grpc.port));
  return std::unique_ptr<TelemetryServer>(new TelemetryServer(std::move(impl)));
}

TelemetryServer::TelemetryServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

TelemetryServer::~TelemetryServer() = default;

int TelemetryServer::port() const { return impl_->grpc.port; }

int TelemetryServer::http_port() const {
  return impl_->http != nullptr ? impl_->http->port() : 0;
}

}  // namespace rl
