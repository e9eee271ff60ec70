#include "actor/actor_process.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "actor/actor_client.h"
#include "actor/actor_workload.h"
#include "common/logging.h"
#include "common/process_memory.h"
#include "common/secrets.h"
#include "common/signal_waiter.h"
#include "common/status.h"
#include "envs/call_watch.h"
#include "envs/env_plugin.h"
#include "policy/compute_device.h"
#include "policy/device_act_check.h"
#include "runspec/run_spec.h"
#include "telemetry/client/metric_table.h"
#include "telemetry/client/metrics_registry.h"
#include "worker/worker_agent.h"
#include "worker/worker_runtime.h"

namespace rl {
namespace {

absl::Status CheckOptions(const ActorProcessOptions& o) {
  auto bad = [](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (o.env_threads < 1) {
    return bad("--env_threads: must be >= 1 (got ", o.env_threads, ")");
  }
  if (o.max_disconnected < absl::Seconds(1)) {
    return bad("--max_disconnected_seconds: must be >= 1 (got ",
               absl::ToInt64Seconds(o.max_disconnected), ")");
  }
  if (!o.coordinator.empty()) return absl::OkStatus();
  if (o.learner.empty()) return bad("--learner is required (HOST:PORT)");
  if (o.learner.find(':') == std::string::npos) {
    return bad("--learner: expected HOST:PORT (got \"", o.learner, "\")");
  }
  if (o.run_file.empty()) return bad("--run is required (a run file)");
  if (o.actor_id < 0) {
    return bad("--actor_id: must be >= 0 (got ", o.actor_id, ")");
  }
  return absl::OkStatus();
}

// An error of the run, not of the input: exit code 1 (common/command_line.h).
// Where /metrics reads the actor's counters from: set once the actor is
// made, cleared before it goes (the HTTP endpoint outlives it).
class CountersSource {
 public:
  using Fn =
      std::function<std::optional<std::pair<std::string, ActorCounters>>()>;
  void Set(Fn fn) {
    absl::MutexLock lock(&mu_);
    fn_ = std::move(fn);
  }
  std::optional<std::pair<std::string, ActorCounters>> Get() {
    absl::MutexLock lock(&mu_);
    return fn_ ? fn_() : std::nullopt;
  }

 private:
  absl::Mutex mu_;
  Fn fn_ ABSL_GUARDED_BY(mu_);
};

// The actor's metric-name table: its families on /metrics (its series are
// collect_metrics.h's).
const std::vector<MetricEntry<ActorCounters>>& ActorMetricTable() {
  using C = ActorCounters;
  static const auto* table = new std::vector<MetricEntry<C>>{
      {nullptr, "actor_segments_collected_total", "Rollout segments collected.",
       "counter", [](const C& c) { return double(c.segments_collected); }},
      {nullptr, "actor_segments_sent_total",
       "Segment writes to the learner, resends included.", "counter",
       [](const C& c) { return double(c.segments_sent); }},
      {nullptr, "actor_segments_resent_total",
       "Writes of a segment already written on an earlier stream.", "counter",
       [](const C& c) { return double(c.segments_resent); }},
      {nullptr, "actor_segments_shared_total",
       "Segment writes through shared memory (a learner on this host).",
       "counter", [](const C& c) { return double(c.segments_shared); }},
      {nullptr, "actor_segments_acked_total",
       "Segments the learner acknowledged.", "counter",
       [](const C& c) { return double(c.segments_acked); }},
      {nullptr, "actor_reconnects_total",
       "Streams opened again after one ended.", "counter",
       [](const C& c) { return double(c.reconnects); }},
      {nullptr, "actor_policy_updates_total", "Policy versions received.",
       "counter", [](const C& c) { return double(c.policy_updates_received); }},
      {nullptr, "actor_policy_version", "Newest policy version received.",
       "gauge", [](const C& c) { return double(c.latest_version); }},
      {nullptr, "actor_segments_dropped_stale_total",
       "Its segments the learner dropped as stale (as it last said).",
       "counter", [](const C& c) { return double(c.dropped_stale); }},
  };
  return *table;
}

// The actor's families, labelled with the run, from the counters `current`
// gives (nullopt: no run, no samples).
void RegisterActorMetrics(MetricsRegistry* registry,
                          std::shared_ptr<CountersSource> current) {
  RegisterMetricTable<ActorCounters>(registry, ActorMetricTable(),
                                     [current] { return current->Get(); });
}

absl::Status RunError(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  return absl::InternalError(status.message());
}

}  // namespace

class ActorProcess::Impl {
 public:
  // /metrics stops reading the actor before it goes.
  ~Impl() { counters_->Set(nullptr); }

  explicit Impl(const ActorProcessOptions& options) : options_(options) {}

  absl::Status Start() {
    RETURN_IF_ERROR(CheckOptions(options_));
    // The env trust model (docs/security.md): where plugins may come from,
    // which Python modules runs may name.
    const std::vector<std::string> plugin_dirs =
        options_.env_plugin_dirs.empty() ? DefaultEnvPluginDirs()
                                         : options_.env_plugin_dirs;
    RL_LOG_INFO("environment plugins load from: {}",
                absl::StrJoin(plugin_dirs, ":"));
    if (!options_.python_env_modules.empty()) {
      setenv("RL_PYTHON_ENV_MODULES",
             absl::StrJoin(options_.python_env_modules, ",").c_str(), 1);
    }
    const bool worker = !options_.coordinator.empty();
    const std::string worker_name = options_.worker_name.empty()
                                        ? absl::StrCat("actor-", getpid())
                                        : options_.worker_name;
    RunSpec spec;
    if (!worker) {
      absl::StatusOr<RunSpec> loaded = LoadRunSpecFile(options_.run_file);
      if (!loaded.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(options_.run_file, ": ", loaded.status().message()));
      }
      spec = *std::move(loaded);
    }
    ProcessTelemetryOptions telemetry = options_.telemetry;
    telemetry.security = options_.security;
    if (telemetry.source.empty()) {
      telemetry.source =
          worker ? worker_name : absl::StrCat("actor/", options_.actor_id);
    }
    ASSIGN_OR_RETURN(telemetry_, ProcessTelemetry::Start(telemetry));

    if (worker) {
      ActorWorkloadOptions workload;
      workload.security = options_.security;
      workload.env_threads = options_.env_threads;
      workload.env_plugin_dirs = plugin_dirs;
      workload.shared_memory = options_.shared_memory;
      workload.profile_segments = options_.profile_segments;
      workload.profile_path = options_.profile_output;
      workload.max_disconnected = options_.max_disconnected;
      workload.emitter = telemetry_->emitter();
      workload.max_rss_bytes = options_.max_rss_mb << 20;
      workload.recycle = [limit = options_.max_rss_mb](int64_t rss) {
        RL_LOG_WARNING(
            "{} MiB resident after the run (over --max_rss_mb={}): this "
            "actor exits for a fresh one to serve the next run",
            rss >> 20, limit);
        ::spdlog::default_logger()->flush();
        _exit(kRecycledExitCode);
      };
      workload_ = std::make_unique<ActorWorkload>(workload);
      WorkerRuntimeOptions runtime;
      runtime.agent.coordinator = options_.coordinator;
      runtime.agent.security = options_.security;
      runtime.agent.role = ACTOR;
      runtime.agent.devices = VisibleCudaDevices();
      runtime.agent.device_checks = [] {
        return DeviceChecksOf(DeviceChecksRun());
      };
      runtime.agent.worker_name = worker_name;
      runtime.agent.address = options_.advertise_address;
      if (!options_.worker_credential_file.empty()) {
        ASSIGN_OR_RETURN(runtime.agent.credential,
                         ReadSecretFile(options_.worker_credential_file,
                                        "worker_credential_file"));
      }
      ASSIGN_OR_RETURN(runtime_,
                       WorkerRuntime::Create(runtime, workload_.get()));
      // An environment call that hangs or crashes ends this process (its
      // supervisor starts a fresh one for later runs); first the run it
      // served fails, with the call named (envs/call_watch.h).
      CallWatch::Process().SetEndHandler(
          [runtime = runtime_.get(),
           workload = workload_.get()](const std::string& reason) {
            const absl::Status sent = runtime->ReportFailure(
                workload->assignment_id(),
                MarkRunFatal(absl::DeadlineExceededError(reason)));
            if (!sent.ok()) {
              RL_LOG_ERROR("reporting the run's failure: {}", sent.ToString());
            }
          });
      CallWatch::Process().EnableEnd();
      CallWatch::Process().CatchCrashes();
      counters_->Set(
          [workload = workload_.get()] { return workload->Counters(); });
      RegisterActorMetrics(telemetry_->registry(), counters_);
      return absl::OkStatus();
    }
    // Standalone, a plugin call past env.call_timeout_s ends this process
    // with kEnvHungExitCode, naming the call (no run to report it to).
    CallWatch::Process().EnableEnd();
    ActorOptions actor;
    actor.learner_address = options_.learner;
    actor.security = options_.security;
    actor.spec = spec;
    actor.run_id = options_.run_id;
    actor.actor_id = options_.actor_id;
    actor.env_threads = options_.env_threads;
    actor.env_plugin_dirs = plugin_dirs;
    actor.shared_memory = options_.shared_memory;
    actor.profile_segments = options_.profile_segments;
    actor.profile_path = options_.profile_output;
    actor.max_disconnected = options_.max_disconnected;
    actor.emitter = telemetry_->emitter();
    actor.emitter->SetRun(actor.run_id.empty() ? spec.name() : actor.run_id);
    ASSIGN_OR_RETURN(client_, ActorClient::Create(actor));
    counters_->Set([client = client_.get(),
                    run = actor.run_id.empty() ? spec.name() : actor.run_id] {
      return std::make_optional(std::make_pair(run, client->counters()));
    });
    RegisterActorMetrics(telemetry_->registry(), counters_);
    return absl::OkStatus();
  }

  absl::Status Wait() {
    if (runtime_ != nullptr) {
      WaitForStopSignalOr([] { return false; });
      CallWatch::Process().SetEndHandler({});  // it reports through runtime_
      runtime_->Stop();
      return absl::OkStatus();
    }
    std::atomic<bool> ended{false};
    absl::Status status;
    std::thread runner([&] {
      status = client_->Run();
      ended = true;
    });
    const int signal = WaitForStopSignalOr([&] { return ended.load(); });
    if (signal != 0) {
      RL_LOG_INFO("{}: stopping at the next segment boundary",
                  signal == SIGTERM ? "SIGTERM" : "SIGINT");
      client_->Stop();
    }
    runner.join();
    return RunError(status);
  }

  void Stop() {
    if (runtime_ != nullptr) {
      CallWatch::Process().SetEndHandler({});
      runtime_->Stop();
    }
  }

 private:
  const ActorProcessOptions options_;
  // Declared first, destroyed last: flushes what the others emitted.
  std::unique_ptr<ProcessTelemetry> telemetry_;
  std::shared_ptr<CountersSource> counters_ =
      std::make_shared<CountersSource>();
  std::unique_ptr<ActorClient> client_;      // standalone
  std::unique_ptr<ActorWorkload> workload_;  // worker mode
  std::unique_ptr<WorkerRuntime> runtime_;
};

absl::StatusOr<std::unique_ptr<ActorProcess>> ActorProcess::Create(
    const ActorProcessOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<ActorProcess>(new ActorProcess(std::move(impl)));
}

ActorProcess::ActorProcess(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

ActorProcess::~ActorProcess() { impl_->Stop(); }

absl::Status ActorProcess::Wait() { return impl_->Wait(); }

}  // namespace rl
