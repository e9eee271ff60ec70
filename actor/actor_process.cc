#include "actor/actor_process.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actor/actor_client.h"
#include "actor/actor_workload.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/signal_waiter.h"
#include "common/status.h"
#include "policy/compute_device.h"
#include "runspec/run_spec.h"
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
absl::Status RunError(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  return absl::InternalError(status.message());
}

}  // namespace

class ActorProcess::Impl {
 public:
  explicit Impl(const ActorProcessOptions& options) : options_(options) {}

  absl::Status Start() {
    RETURN_IF_ERROR(CheckOptions(options_));
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
    if (telemetry.source.empty()) {
      telemetry.source =
          worker ? worker_name : absl::StrCat("actor/", options_.actor_id);
    }
    ASSIGN_OR_RETURN(telemetry_, ProcessTelemetry::Start(telemetry));

    if (worker) {
      ActorWorkloadOptions workload;
      workload.env_threads = options_.env_threads;
      workload.max_disconnected = options_.max_disconnected;
      workload.emitter = telemetry_->emitter();
      workload_ = std::make_unique<ActorWorkload>(workload);
      WorkerRuntimeOptions runtime;
      runtime.agent.coordinator = options_.coordinator;
      runtime.agent.role = ACTOR;
      runtime.agent.devices = VisibleCudaDevices();
      runtime.agent.worker_name = worker_name;
      runtime.agent.address = options_.advertise_address;
      if (!options_.worker_credential_file.empty()) {
        ASSIGN_OR_RETURN(runtime.agent.credential,
                         ReadSecretFile(options_.worker_credential_file,
                                        "worker_credential_file"));
      }
      ASSIGN_OR_RETURN(runtime_,
                       WorkerRuntime::Create(runtime, workload_.get()));
      return absl::OkStatus();
    }
    ActorOptions actor;
    actor.learner_address = options_.learner;
    actor.spec = spec;
    actor.run_id = options_.run_id;
    actor.actor_id = options_.actor_id;
    actor.env_threads = options_.env_threads;
    actor.max_disconnected = options_.max_disconnected;
    actor.emitter = telemetry_->emitter();
    actor.emitter->SetRun(actor.run_id.empty() ? spec.name() : actor.run_id);
    ASSIGN_OR_RETURN(client_, ActorClient::Create(actor));
    return absl::OkStatus();
  }

  absl::Status Wait() {
    if (runtime_ != nullptr) {
      WaitForStopSignalOr([] { return false; });
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
    if (runtime_ != nullptr) runtime_->Stop();
  }

 private:
  const ActorProcessOptions options_;
  // Declared first, destroyed last: flushes what the others emitted.
  std::unique_ptr<ProcessTelemetry> telemetry_;
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
