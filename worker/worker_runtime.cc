#include "worker/worker_runtime.h"

#include <utility>

#include "absl/status/status.h"
#include "common/logging.h"

namespace rl {

absl::StatusOr<std::unique_ptr<WorkerRuntime>> WorkerRuntime::Create(
    const WorkerRuntimeOptions& options, Workload* workload) {
  const WorkerAgentOptions& agent = options.agent;
  if (agent.coordinator.empty() && agent.channel == nullptr) {
    return absl::InvalidArgumentError(
        "worker: a coordinator address (HOST:PORT) is required");
  }
  if (agent.worker_name.empty()) {
    return absl::InvalidArgumentError("worker: a worker name is required");
  }
  if (agent.role == WORKER_ROLE_UNSPECIFIED) {
    return absl::InvalidArgumentError("worker: a role is required");
  }
  if (options.report_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "worker: report_interval must be positive");
  }
  if (workload == nullptr) {
    return absl::InvalidArgumentError("worker: no workload");
  }
  auto runtime =
      std::unique_ptr<WorkerRuntime>(new WorkerRuntime(options, workload));
  runtime->agent_->Start();
  runtime->thread_ =
      StartThread("worker-run", [r = runtime.get()] { r->Loop(); });
  return runtime;
}

WorkerRuntime::WorkerRuntime(const WorkerRuntimeOptions& options,
                             Workload* workload)
    : options_(options), workload_(workload) {
  agent_ = std::make_unique<WorkerAgent>(
      options_.agent,
      [this](const Assignment& assignment) { OnAssignment(assignment); });
}

WorkerRuntime::~WorkerRuntime() { Stop(); }

void WorkerRuntime::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // The agent goes last: a final report above still needs it. Its thread is
  // joined here, so no assignment callback runs after this.
  agent_.reset();
}

absl::Status WorkerRuntime::ReportFailure(int64_t assignment_id,
                                          const absl::Status& failure) {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return absl::CancelledError("the worker is stopping");
  }
  return agent_->Report(std::nullopt, /*finished=*/true, failure,
                        assignment_id);
}

int64_t WorkerRuntime::assignments_started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

void WorkerRuntime::OnAssignment(const Assignment& assignment) {
  // The cancel and the assignment are published as one, under the lock the
  // loop picks assignments with (Workload::Picked): a Start of this very
  // assignment never sees its cancel (it would give up its gang's
  // rendezvous with nothing newer to start, and the worker would sit idle),
  // and a Start of an older one always does, even when the cancel came
  // while the work before it was stopping.
  absl::MutexLock lock(&mu_);
  workload_->Cancel();
  desired_ = assignment;
  changed_ = true;
}

bool WorkerRuntime::Report(const WorkloadState& state) {
  if (!state.finished && !state.progress.has_value()) return false;
  const absl::Status sent =
      agent_->Report(state.progress, state.finished, state.status);
  if (!sent.ok()) {
    // Progress is sent again next time; an end is retried until it is out.
    RL_LOG_WARNING("report to the coordinator failed: {}", sent.ToString());
    return false;
  }
  return state.finished;
}

void WorkerRuntime::Loop() {
  bool running = false;  // a workload was started for the current assignment
  bool ended = false;    // its end was reported
  WorkloadState failed;  // a start that failed, until reported
  bool start_failed = false;
  for (;;) {
    Assignment assignment;
    bool changed = false;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ || changed_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&wake), options_.report_interval);
      if (stop_) break;
      if (changed_) {
        changed = true;
        changed_ = false;
        assignment = desired_;
        workload_->Picked();
      }
    }
    if (changed) {
      if (running) workload_->Stop();
      running = ended = start_failed = false;
      {
        // A newer assignment came while the work stopped (which may take a
        // while: an update stuck in its collective): start that one.
        absl::MutexLock lock(&mu_);
        if (changed_) {
          RL_LOG_INFO("assignment {} replaced before it started",
                      assignment.assignment_id());
          continue;
        }
      }
      if (assignment.run_id().empty()) {
        RL_LOG_INFO("assignment ended; idle");
        continue;
      }
      RL_LOG_INFO("assigned run {} (assignment {}, rank {})",
                  assignment.run_id(), assignment.assignment_id(),
                  assignment.rank());
      {
        absl::MutexLock lock(&mu_);
        ++started_;
      }
      const absl::Status started = workload_->Start(assignment);
      if (started.ok()) {
        running = true;
      } else if (started.code() == absl::StatusCode::kCancelled) {
        RL_LOG_INFO("assignment {} replaced while starting: {}",
                    assignment.assignment_id(), started.ToString());
      } else {
        RL_LOG_ERROR("assignment {} cannot start: {}",
                     assignment.assignment_id(), started.ToString());
        start_failed = true;
        failed = WorkloadState{true, started, std::nullopt};
      }
    }
    if (start_failed) {
      if (Report(failed)) start_failed = false;
      continue;
    }
    if (running && !ended) {
      ended = Report(workload_->Poll());
      if (ended) workload_->Idle();
    }
  }
  if (running) workload_->Stop();
}

}  // namespace rl
