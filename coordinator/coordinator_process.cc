#include "coordinator/coordinator_process.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_lock.h"
#include "common/grpc_util.h"
#include "common/port_file.h"
#include "common/signal_waiter.h"
#include "common/status.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/local_workers.h"
#include "coordinator/queue_wait.h"
#include "telemetry/client/metric_table.h"

namespace rl {
namespace {

// The coordinator's figures now: runs per state, workers per role, the
// watch streams and the refusals.
struct CoordinatorFigures {
  std::map<std::string, int> runs_by_state;
  std::map<std::string, int> workers_by_role;
  int64_t watchers = 0;
  int64_t refused_watchers = 0;
  int64_t refused_user_watchers = 0;
  int64_t refused_user_queue = 0;
};

CoordinatorFigures TakeFigures(CoordinatorCore* core,
                               const RunServiceImpl* runs) {
  CoordinatorFigures c;
  for (int s = RunState_MIN; s <= RunState_MAX; ++s) {
    if (RunState_IsValid(s) && s != RUN_STATE_UNSPECIFIED) {
      c.runs_by_state[RunState_Name(static_cast<RunState>(s))] = 0;
    }
  }
  ListRunsRequest request;
  request.set_page_size(1000);
  for (;;) {
    absl::StatusOr<ListRunsResponse> page = core->ListRuns(request);
    if (!page.ok()) break;
    for (const Run& run : page->runs()) {
      ++c.runs_by_state[RunState_Name(run.state())];
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  const ListWorkersResponse workers = core->ListWorkers();
  for (const Worker& w : workers.workers()) {
    if (w.alive())
      ++c.workers_by_role[WorkerRole_Name(w.capabilities().role())];
  }
  c.watchers = runs->watchers();
  c.refused_watchers = runs->refused_watchers();
  c.refused_user_watchers = runs->refused_user_watchers();
  c.refused_user_queue = core->refused_by_user_quota();
  return c;
}

MetricSamples ByLabel(const char* label, const std::map<std::string, int>& n) {
  MetricSamples out;
  for (const auto& [value, count] : n) {
    out.push_back({{{label, value}}, static_cast<double>(count)});
  }
  return out;
}

// The coordinator's metric-name table (see telemetry/client/metric_table.h).
const std::vector<MetricEntry<CoordinatorFigures>>& CoordinatorMetricTable() {
  using F = CoordinatorFigures;
  static const auto* table = new std::vector<MetricEntry<F>>{
      {"coordinator/runs", "coordinator_runs", "Runs by state.", "gauge",
       nullptr, [](const F& f) { return ByLabel("state", f.runs_by_state); }},
      {nullptr, "coordinator_workers", "Registered workers by role.", "gauge",
       nullptr, [](const F& f) { return ByLabel("role", f.workers_by_role); }},
      {"coordinator/workers", nullptr, nullptr, nullptr,
       [](const F& f) {
         int n = 0;
         for (const auto& [role, count] : f.workers_by_role) n += count;
         return static_cast<double>(n);
       }},
      {nullptr, "coordinator_watchers", "Open WatchRun streams.", "gauge",
       [](const F& f) { return static_cast<double>(f.watchers); }},
      {nullptr, "coordinator_refused_total",
       "Requests refused by a limit (--max_watchers, "
       "--max_queued_runs_per_user).",
       "counter", nullptr,
       [](const F& f) {
         return MetricSamples{{{{"reason", "watchers"}},
                               static_cast<double>(f.refused_watchers)},
                              {{{"reason", "user_watchers"}},
                               static_cast<double>(f.refused_user_watchers)},
                              {{{"reason", "user_queue"}},
                               static_cast<double>(f.refused_user_queue)}};
       }},
  };
  return *table;
}

}  // namespace

class CoordinatorProcess::Impl {
 public:
  explicit Impl(const CoordinatorProcessOptions& options) : options_(options) {}

  ~Impl() {
    if (watch_id_ >= 0) core_->Unwatch(watch_id_);
  }

  absl::Status Start() {
    if (options_.max_request_kb < 1 || options_.max_request_kb > (1 << 21)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_request_kb: must be in [1, 2097152] (got ",
                       options_.max_request_kb, ")"));
    }
    if (options_.lease_ttl <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--lease_ttl_s: must be > 0");
    }
    if (options_.max_watchers < 1) {
      return absl::InvalidArgumentError("--max_watchers: must be >= 1");
    }
    if (options_.unplaceable_timeout < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "--unplaceable_timeout_s: must be >= 0 (0: wait for ever)");
    }
    if (options_.max_worker_failures < 0) {
      return absl::InvalidArgumentError("--max_worker_failures: must be >= 0");
    }
    if (options_.worker_failure_window <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "--worker_failure_window_s: must be > 0");
    }
    if (options_.max_message_mb < 1 || options_.max_message_mb > 2047) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_message_mb: must be in [1, 2047] (got ",
                       options_.max_message_mb, ")"));
    }
    std::error_code ec;
    const auto parent = std::filesystem::path(options_.store).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    // One coordinator per store: a second one must not recover runs from a
    // store that a live one is changing.
    ASSIGN_OR_RETURN(FileLock lock,
                     FileLock::Acquire(options_.store,
                                       absl::StrCat("coordinator pid ",
                                                    getpid(), ", starting")));
    store_lock_.emplace(std::move(lock));
    std::shared_ptr<const Security> security = options_.security != nullptr
                                                   ? options_.security
                                                   : Security::ProcessDefault();
    LocalDoors doors;
    if (!options_.embedded.local_workers.empty()) {
      ASSIGN_OR_RETURN(doors, LockLocalDoors(options_.runs_dir, security));
      security = doors.security;
    }
    CoordinatorOptions core;
    core.store_path = options_.store;
    core.max_store_bytes = options_.max_store_mb << 20;
    core.runs_dir = options_.runs_dir;
    core.lease_ttl = options_.lease_ttl;
    core.unplaceable_timeout = options_.unplaceable_timeout;
    core.max_worker_failures = options_.max_worker_failures;
    // Wherever tokens exist, a worker token alone does not make a worker:
    // it must show an operator-issued credential too (the embedded default
    // gives its children theirs). Without tokens nobody is told apart.
    core.require_worker_credentials =
        options_.require_worker_credentials && security->tokens_required();
    core.tokens_required = security->tokens_required();
    core.max_time_without_progress = options_.max_time_without_progress;
    core.max_queued_runs_per_user = options_.max_queued_runs_per_user;
    core.worker_failure_window = options_.worker_failure_window;
    core.footprint_limits.max_message_bytes =
        static_cast<double>(options_.max_message_mb) * (1 << 20);
    if (!options_.embedded.local_workers.empty()) {
      // The embedded system's pool is fixed: these workers and no others.
      LocalWorkerOptions pool;
      RETURN_IF_ERROR(
          ParseLocalWorkers(options_.embedded.local_workers, &pool));
      for (const std::string& name : LocalWorkerNames(pool, LEARNER)) {
        core.fixed_pool.emplace_back(name, LEARNER);
      }
      for (const std::string& name : LocalWorkerNames(pool, ACTOR)) {
        core.fixed_pool.emplace_back(name, ACTOR);
      }
    }
    ASSIGN_OR_RETURN(core_, CoordinatorCore::Create(core));
    ASSIGN_OR_RETURN(sweeps_,
                     SweepManager::Create(core_.get(), core_->store(),
                                          options_.max_sweeps_per_user));
    // After the doors: the services identify callers by the same tokens
    // the server checks.
    ServerOptions server;
    server.security = security;
    runs_ = std::make_unique<RunServiceImpl>(core_.get(), options_.max_watchers,
                                             options_.max_watchers_per_user,
                                             server.security, sweeps_.get());
    workers_ = std::make_unique<WorkerServiceImpl>(core_.get());
    server.address = absl::StrCat(options_.host, ":", options_.port);
    server.max_receive_message_bytes = options_.max_request_kb << 10;
    ASSIGN_OR_RETURN(server_,
                     StartServer({runs_.get(), workers_.get()}, server));
    std::printf("coordinator listening on %s:%d\n", options_.host.c_str(),
                server_.port);
    std::fflush(stdout);
    RETURN_IF_ERROR(WritePortFile(options_.port_file, server_.port));
    store_lock_
        ->SetHolder(absl::StrCat("coordinator pid ", getpid(), " serving ",
                                 options_.host, ":", server_.port))
        .IgnoreError();

    ProcessTelemetryOptions telemetry = options_.telemetry;
    telemetry.security = security;
    telemetry.source = "coordinator";
    telemetry.host = options_.host;
    if (!options_.embedded.local_workers.empty()) {
      EmbeddedSystemOptions embedded = options_.embedded;
      embedded.host = options_.host;
      embedded.coordinator_port = server_.port;
      embedded.ephemeral_ports = options_.port == 0;
      embedded.runs_dir = options_.runs_dir;
      embedded.doors = doors;
      embedded.worker_credential = [core =
                                        core_.get()](const std::string& name) {
        return core->WorkerCredential(name);
      };
      embedded.on_worker_exit = [core = core_.get()](const std::string& name,
                                                     const std::string& how) {
        core->NoteWorkerExit(name, how);
      };
      ASSIGN_OR_RETURN(embedded_, EmbeddedSystem::Create(embedded));
      // The local telemetry, when there is one, wins over the option.
      if (!embedded_->telemetry_address().empty()) {
        telemetry.telemetry_target = embedded_->telemetry_address();
      }
    }
    ASSIGN_OR_RETURN(telemetry_, ProcessTelemetry::Start(telemetry));
    WatchQueueWaits();
    RegisterProcessMetricTable<CoordinatorFigures>(
        telemetry_->registry(), CoordinatorMetricTable(),
        [core = core_.get(), runs = runs_.get()] {
          return TakeFigures(core, runs);
        });
    if (embedded_ != nullptr) embedded_->Start();
    return absl::OkStatus();
  }

  absl::Status Wait() {
    absl::Time next_census = absl::Now();
    while (WaitForStopSignal(absl::Milliseconds(200)) == 0) {
      if (embedded_ != nullptr) embedded_->Supervise();
      core_->Tick();
      sweeps_->Tick();
      if (absl::Now() >= next_census) {
        next_census = absl::Now() + absl::Seconds(5);
        // Steps are wall-clock seconds: they go on across a coordinator
        // restart (the store replaces points re-emitted at a step).
        if (telemetry_->emitter()->enabled()) {
          EmitMetricTable(
              telemetry_->emitter(), absl::ToUnixSeconds(absl::Now()),
              CoordinatorMetricTable(), TakeFigures(core_.get(), runs_.get()));
        }
      }
    }
    Shutdown();
    return absl::OkStatus();
  }

  void Shutdown() {
    if (watch_id_ >= 0) core_->Unwatch(watch_id_);
    watch_id_ = -1;
    if (embedded_ != nullptr) embedded_->Shutdown();
    if (server_.server != nullptr) {
      server_.server->Shutdown(
          absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    }
  }

 private:
  // Queue wait: submission to first RUNNING, once per run, labelled with
  // the run (coordinator/queue_wait.h).
  void WatchQueueWaits() {
    auto reporter = std::make_shared<QueueWaitReporter>(telemetry_->emitter());
    watch_id_ = core_->Watch(
        [reporter](const Run& run) { reporter->Observe(run, absl::Now()); });
  }

  const CoordinatorProcessOptions options_;
  std::optional<FileLock> store_lock_;  // held for the process's life
  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<SweepManager> sweeps_;
  std::unique_ptr<RunServiceImpl> runs_;
  std::unique_ptr<WorkerServiceImpl> workers_;
  RunningServer server_;
  std::unique_ptr<EmbeddedSystem> embedded_;
  std::unique_ptr<ProcessTelemetry> telemetry_;
  int64_t watch_id_ = -1;
};

absl::StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Create(
    const CoordinatorProcessOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<CoordinatorProcess>(
      new CoordinatorProcess(std::move(impl)));
}

CoordinatorProcess::CoordinatorProcess(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

CoordinatorProcess::~CoordinatorProcess() { impl_->Shutdown(); }

absl::Status CoordinatorProcess::Wait() { return impl_->Wait(); }

}  // namespace rl
