#include "learner/learner_process.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/secrets.h"
#include "common/signal_waiter.h"
#include "common/status.h"
#include "learner/c10d_collective.h"
#include "learner/learner_core.h"
#include "learner/learner_metrics.h"
#include "learner/learner_service.h"
#include "learner/learner_workload.h"
#include "learner/policy_learner_service.h"
#include "policy/compute_device.h"
#include "policy/device_act_check.h"
#include "runspec/run_spec.h"
#include "worker/worker_agent.h"
#include "worker/worker_runtime.h"

namespace rl {
namespace {

// The core /metrics reports on; it changes with assignments.
class CurrentCore {
 public:
  void Set(std::shared_ptr<LearnerCore> core) {
    absl::MutexLock lock(&mu_);
    core_ = std::move(core);
  }
  std::shared_ptr<LearnerCore> Get() {
    absl::MutexLock lock(&mu_);
    return core_;
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<LearnerCore> core_ ABSL_GUARDED_BY(mu_);
};

// The learner's families on its /metrics (learner_metrics.h), labelled
// with the run of the core `current` holds (none while it holds none).
void RegisterLearnerMetrics(MetricsRegistry* registry,
                            std::shared_ptr<CurrentCore> current) {
  RegisterMetricTable<LearnerFigures>(
      registry, LearnerMetricTable(),
      [current]() -> std::optional<std::pair<std::string, LearnerFigures>> {
        std::shared_ptr<LearnerCore> core = current->Get();
        if (core == nullptr) return std::nullopt;
        LearnerFigures figures;
        figures.status = core->GetStatus();
        return std::make_pair(core->run_id(), std::move(figures));
      });
}

// The learner process's own figures: its streams and its segment budget.
struct LearnerProcessFigures {
  int64_t open_streams = 0;
  int64_t refused_streams = 0;
  int64_t refused_streams_per_client = 0;
  int64_t inflight_segment_bytes = 0;
  int64_t refused_segments = 0;
};

const std::vector<MetricEntry<LearnerProcessFigures>>&
LearnerProcessMetricTable() {
  using F = LearnerProcessFigures;
  static const auto* table = new std::vector<MetricEntry<F>>{
      {nullptr, "learner_open_streams", "Open rollout and policy streams.",
       "gauge", [](const F& f) { return static_cast<double>(f.open_streams); }},
      {nullptr, "learner_refused_streams_total",
       "Streams refused: limit=\"total\" by --max_streams, "
       "limit=\"per_client\" by --max_streams_per_client.",
       "counter", nullptr,
       [](const F& f) {
         return MetricSamples{
             {{{"limit", "total"}}, static_cast<double>(f.refused_streams)},
             {{{"limit", "per_client"}},
              static_cast<double>(f.refused_streams_per_client)}};
       }},
      {nullptr, "learner_inflight_segment_bytes",
       "Bytes of rollout segments waiting for the PPO thread.", "gauge",
       [](const F& f) {
         return static_cast<double>(f.inflight_segment_bytes);
       }},
      {nullptr, "learner_refused_segments_total",
       "Rollout segments refused by --max_inflight_segment_mb.", "counter",
       [](const F& f) { return static_cast<double>(f.refused_segments); }},
  };
  return *table;
}

void RegisterLearnerProcessMetrics(MetricsRegistry* registry,
                                   const LearnerServiceImpl* service,
                                   std::shared_ptr<SegmentBudget> budget) {
  RegisterProcessMetricTable<LearnerProcessFigures>(
      registry, LearnerProcessMetricTable(), [service, budget] {
        LearnerProcessFigures f;
        f.open_streams = service->open_streams();
        f.refused_streams = service->refused_streams();
        f.refused_streams_per_client = service->refused_streams_per_client();
        f.inflight_segment_bytes = budget->held_bytes();
        f.refused_segments = budget->refused();
        return f;
      });
}

std::string ResultJson(const LearnerStatus& s, bool done) {
  const double mean = s.progress().mean_return();
  return absl::StrFormat(
      "{\"done\": %s, \"env_steps\": %d, \"updates\": %d, "
      "\"policy_version\": %d, \"episodes\": %d, \"mean_return\": %s, "
      "\"steps_per_second\": %.1f, \"segments_received\": %d, "
      "\"segments_rejected\": %d, \"segments_dropped_stale\": %d, "
      "\"segments_duplicate\": %d}\n",
      done ? "true" : "false", s.env_steps(), s.updates(), s.policy_version(),
      s.progress().episodes(),
      std::isfinite(mean) ? absl::StrFormat("%.3f", mean) : "null",
      s.progress().steps_per_second(), s.segments_received(),
      s.segments_rejected(), s.segments_dropped_stale(),
      s.segments_duplicate());
}

}  // namespace

class LearnerProcess::Impl {
 public:
  explicit Impl(const LearnerProcessOptions& options)
      : options_(options),
        service_(nullptr, options.max_streams, options.max_streams_per_client,
                 options.security) {}

  absl::Status Start() {
    const bool worker = !options_.coordinator.empty();
    if (!worker && options_.run_file.empty()) {
      return absl::InvalidArgumentError(
          "--run is required (a run file), or --coordinator for worker mode");
    }
    if (options_.max_streams_per_client < 1) {
      return absl::InvalidArgumentError(
          "--max_streams_per_client: must be >= 1");
    }
    if (options_.max_streams < 1) {
      return absl::InvalidArgumentError("--max_streams: must be >= 1");
    }
    if (options_.max_inflight_segment_mb < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_inflight_segment_mb: must be >= 1 (got ",
                       options_.max_inflight_segment_mb, ")"));
    }
    segment_budget_ = std::make_shared<SegmentBudget>(
        int64_t{options_.max_inflight_segment_mb} << 20);
    if (options_.max_message_mb < 1 || options_.max_message_mb > 2047) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_message_mb: must be in [1, 2047] (got ",
                       options_.max_message_mb, ")"));
    }
    RunSpec spec;
    if (!worker) {
      absl::StatusOr<RunSpec> loaded = LoadRunSpecFile(options_.run_file);
      if (!loaded.ok()) {
        return absl::InvalidArgumentError(loaded.status().message());
      }
      spec = *std::move(loaded);
    }
    ProcessTelemetryOptions telemetry = options_.telemetry;
    if (telemetry.source.empty()) {
      telemetry.source = options_.worker_name.empty()
                             ? absl::StrCat("learner/", getpid())
                             : options_.worker_name;
    }
    telemetry.host = options_.host;
    telemetry.security = options_.security;
    ASSIGN_OR_RETURN(telemetry_, ProcessTelemetry::Start(telemetry));
    RegisterLearnerMetrics(telemetry_->registry(), current_);
    RegisterLearnerProcessMetrics(telemetry_->registry(), &service_,
                                  segment_budget_);

    if (!worker) {
      LearnerOptions learner;
      learner.spec = spec;
      learner.run_id = options_.run_id.empty() ? spec.name() : options_.run_id;
      learner.run_dir = options_.run_dir;
      learner.profile_updates = options_.profile_updates;
      learner.profile_path = options_.profile_output;
      learner.emitter = telemetry_->emitter();
      learner.segment_budget = segment_budget_;
      telemetry_->emitter()->SetRun(learner.run_id);
      ASSIGN_OR_RETURN(std::unique_ptr<LearnerCore> core,
                       LearnerCore::Create(learner));
      core_ = std::move(core);
      current_->Set(core_);
      service_.SetCore(core_);
    }
    ServerOptions server;
    server.security = options_.security;
    server.address = absl::StrCat(options_.host, ":", options_.port);
    // Rollout segments are large; other messages are small anyway.
    server.max_receive_message_bytes = options_.max_message_mb << 20;
    server.max_send_message_bytes = 256 << 20;
    // A worker may be asked to train one policy of a run's block for the
    // run's first learner (resources.learner_per_policy).
    std::vector<grpc::Service*> services = {&service_};
    if (worker) services.push_back(&policy_service_);
    ASSIGN_OR_RETURN(server_, StartServer(services, server));
    std::printf("learner listening on %s:%d\n", options_.host.c_str(),
                server_.port);
    std::fflush(stdout);
    RETURN_IF_ERROR(WritePortFile(options_.port_file, server_.port));

    if (worker) {
      const std::string advertised = options_.advertise_address.empty()
                                         ? options_.host
                                         : options_.advertise_address;
      if (advertised == "0.0.0.0" || advertised == "::") {
        return absl::InvalidArgumentError(
            "--advertise_address: required when --host is a wildcard (the "
            "address actors and peer learners reach this learner at)");
      }
      // The store listens where the learner does (loopback by default), or
      // at the advertised address when --host is a wildcard and that is a
      // literal address; a name (e.g. a Kubernetes pod's, which may not
      // resolve before the pod is ready) keeps every interface
      // (docs/security.md).
      std::string store_host = options_.host;
      if (store_host == "0.0.0.0" || store_host == "::") {
        in6_addr literal;
        if (inet_pton(AF_INET, advertised.c_str(), &literal) == 1 ||
            inet_pton(AF_INET6, advertised.c_str(), &literal) == 1) {
          store_host = advertised;
        }
      }
      ASSIGN_OR_RETURN(rendezvous_, RendezvousServer::Start(
                                        options_.rendezvous_port, store_host));
      workload_ = std::make_unique<LearnerWorkload>(
          &service_, telemetry_->emitter(),
          [current = current_](std::shared_ptr<LearnerCore> core) {
            current->Set(std::move(core));
          },
          advertised, options_.rendezvous_timeout, segment_budget_,
          &policy_service_);
      workload_->set_profile(options_.profile_updates, options_.profile_output);
      WorkerRuntimeOptions runtime;
      runtime.agent.coordinator = options_.coordinator;
      runtime.agent.security = options_.security;
      runtime.agent.role = LEARNER;
      runtime.agent.devices = VisibleCudaDevices();
      runtime.agent.device_checks = [] {
        return DeviceChecksOf(DeviceChecksRun());
      };
      runtime.agent.address = absl::StrCat(advertised, ":", server_.port);
      runtime.agent.rendezvous_address =
          absl::StrCat(advertised, ":", rendezvous_->port());
      runtime.agent.worker_name =
          options_.worker_name.empty()
              ? absl::StrCat("learner-", runtime.agent.address)
              : options_.worker_name;
      if (!options_.worker_credential_file.empty()) {
        ASSIGN_OR_RETURN(runtime.agent.credential,
                         ReadSecretFile(options_.worker_credential_file,
                                        "worker_credential_file"));
      }
      ASSIGN_OR_RETURN(runtime_,
                       WorkerRuntime::Create(runtime, workload_.get()));
    }
    return absl::OkStatus();
  }

  absl::Status Wait() {
    if (runtime_ != nullptr) {
      WaitForStopSignalOr([] { return false; });
      Shutdown();
      return absl::OkStatus();
    }
    bool done = false;
    absl::Time last_log = absl::Now();
    while (!done) {
      if (WaitForStopSignal(absl::Milliseconds(200)) != 0) break;
      done = core_->WaitUntilDone(absl::ZeroDuration());
      if (absl::Now() - last_log > absl::Seconds(5)) {
        LogProgress(core_->GetStatus());
        last_log = absl::Now();
      }
    }
    if (done) {
      // Give subscribers a moment to receive the final version.
      const absl::Time deadline = absl::Now() + absl::Seconds(5);
      while (absl::Now() < deadline &&
             core_->GetStatus().connected_actors() > 0) {
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
    // The summary is what training ended with: stopped first (with its
    // checkpoint on stop), so it matches the checkpoint, not a moment before.
    core_->Stop();
    const LearnerStatus status = core_->GetStatus();
    Shutdown();
    if (!options_.result_file.empty()) {
      RETURN_IF_ERROR(
          WriteFileAtomically(options_.result_file, ResultJson(status, done)));
    }
    RETURN_IF_ERROR(core_->final_status());
    std::printf("learner %s: %lld env steps, %lld updates, mean return %.1f\n",
                done ? "done" : "stopped",
                static_cast<long long>(status.env_steps()),
                static_cast<long long>(status.updates()),
                status.progress().mean_return());
    return absl::OkStatus();
  }

  void Shutdown() {
    if (runtime_ != nullptr) runtime_->Stop();
    if (server_.server != nullptr) {
      server_.server->Shutdown(
          absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    }
    current_->Set(nullptr);
  }

 private:
  static void LogProgress(const LearnerStatus& s) {
    RL_LOG_INFO(
        "version {} | {} steps | {:.0f} steps/s | return(100) {:.1f} | "
        "actors {} | rejected {} stale {} duplicate {}",
        s.policy_version(), s.env_steps(), s.progress().steps_per_second(),
        s.progress().mean_return(), s.connected_actors(), s.segments_rejected(),
        s.segments_dropped_stale(), s.segments_duplicate());
  }

  const LearnerProcessOptions options_;
  std::shared_ptr<CurrentCore> current_ = std::make_shared<CurrentCore>();
  // Declared before what uses it, so it is destroyed last (flushes).
  std::unique_ptr<ProcessTelemetry> telemetry_;
  LearnerServiceImpl service_;
  PolicyLearnerServiceImpl policy_service_;  // worker mode
  // Shared by every core of this process (--max_inflight_segment_mb).
  std::shared_ptr<SegmentBudget> segment_budget_;
  std::shared_ptr<LearnerCore> core_;  // standalone
  RunningServer server_;
  std::unique_ptr<RendezvousServer> rendezvous_;  // worker mode
  std::unique_ptr<LearnerWorkload> workload_;     // worker mode
  std::unique_ptr<WorkerRuntime> runtime_;
};

absl::StatusOr<std::unique_ptr<LearnerProcess>> LearnerProcess::Create(
    const LearnerProcessOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<LearnerProcess>(new LearnerProcess(std::move(impl)));
}

LearnerProcess::LearnerProcess(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

LearnerProcess::~LearnerProcess() { impl_->Shutdown(); }

absl::Status LearnerProcess::Wait() { return impl_->Wait(); }

}  // namespace rl
