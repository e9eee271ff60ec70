// CoordinatorCore's workers: registration and who holds a name (keys,
// credentials), heartbeats, status reports (progress, a run's end, a
// failure), the list of workers, and the workers of recovered runs that did
// not come back.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/reason_text.h"
#include "coordinator/registration_check.h"
#include "coordinator/worker_keys.h"

namespace rl {

std::string CoordinatorCore::WorkerCredential(
    const std::string& worker_name) const {
  return WorkerCredentialFromSecret(options_.key_secret, worker_name);
}

absl::Status CoordinatorCore::CheckWorkerKeyLocked(
    const std::string& worker_id, const std::string& key) const {
  if (keys_.IsKey(worker_id, key)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "worker_key: not the key of worker ", worker_id,
      " (only the process that registered it may act for it; re-register)"));
}

void CoordinatorCore::NoteWorkerExit(const std::string& worker_name,
                                     const std::string& how) {
  std::vector<Run> changed;
  {
    absl::MutexLock lock(&mu_);
    // Known gone: a run placed on it now would only fail again when its
    // next process registers without that run.
    std::optional<LostWorker> lost = scheduler_.Remove(worker_name);
    if (!lost.has_value()) return;
    LoseWorkerLocked(*lost,
                     absl::StrCat(lost->role == LEARNER ? "learner " : "actor ",
                                  worker_name, "'s process ", how),
                     &changed);
  }
  for (const Run& run : changed) Notify(run);
}

absl::StatusOr<RegisterWorkerResponse> CoordinatorCore::RegisterWorker(
    const RegisterWorkerRequest& request) {
  if (request.worker_name().empty()) {
    return absl::InvalidArgumentError("worker_name: required");
  }
  RETURN_IF_ERROR(CheckRegistration(request));
  const WorkerRole role = request.capabilities().role();
  if (role != LEARNER && role != ACTOR) {
    return absl::InvalidArgumentError(
        "capabilities.role: must be LEARNER or ACTOR");
  }
  if (role == LEARNER && request.address().empty()) {
    return absl::InvalidArgumentError(
        "address: a learner must give the address actors reach it at");
  }
  std::optional<Run> restarted;  // notified once the lock is released
  absl::ReleasableMutexLock lock(&mu_);
  const std::string& name = request.worker_name();
  const bool credentialed =
      keys_.IsCredential(name, request.worker_credential());
  if (!request.worker_credential().empty() && !credentialed) {
    return absl::PermissionDeniedError(
        absl::StrCat("worker_credential: not the credential of worker ", name));
  }
  const bool has_key = keys_.IsKey(name, request.worker_key());
  if (!has_key && !credentialed) {
    if (options_.require_worker_credentials) {
      return absl::PermissionDeniedError(
          absl::StrCat("worker ", name,
                       ": this coordinator requires an operator-issued "
                       "worker_credential (--worker_credential_file)"));
    }
    if (NameHeldLocked(name)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "worker name ", name,
          " is registered to another live process: register with its "
          "worker_key, an operator-issued worker_credential, or after its "
          "lease (",
          absl::FormatDuration(options_.lease_ttl), ") expires"));
    }
  }
  // Accepted. A credential marks this process trusted; its own key keeps
  // what it had; anything else registers an untrusted one.
  if (credentialed) {
    credentialed_.insert(name);
  } else if (!has_key) {
    credentialed_.erase(name);
  }
  // The workers table is a record for operators, not state the coordinator
  // needs: a full store does not stop a worker from registering.
  if (absl::Status stored = store_->PutWorker(name, role, request.address());
      !stored.ok()) {
    RL_LOG_WARNING("cannot record worker {} in the store: {}", name,
                   stored.ToString());
  }
  const Assignment& reported = request.current_assignment();
  // Keep the reported assignment only if it is the one recorded for this
  // worker (before a coordinator restart) or the one it holds now.
  bool recorded = false;
  // A learner that held a run before this coordinator's restart and comes
  // back without it (its process was restarted, as local workers are with
  // their coordinator): its run goes back to the queue now, not after the
  // lease the others get to come back.
  std::string recovered_run_gone;
  if (auto it = recovered_assignments_.find(request.worker_name());
      it != recovered_assignments_.end()) {
    recorded = it->second.run_id == reported.run_id() &&
               it->second.assignment_id == reported.assignment_id();
    if (!recorded && it->second.role == LEARNER) {
      recovered_run_gone = it->second.run_id;
    }
    recovered_assignments_.erase(it);
  } else if (auto id = assignment_ids_.find(request.worker_name());
             id != assignment_ids_.end()) {
    recorded = id->second == reported.assignment_id();
  }
  // Only the process that holds the worker's key may keep its assignment.
  if (recorded && !has_key) {
    static LogLimiter* const limiter = new LogLimiter();
    std::string left_out;
    if (limiter->Allow(request.worker_name(), &left_out)) {
      RL_LOG_WARNING(
          "worker {} re-registered without its key: its assignment is not "
          "kept{}",
          request.worker_name(), left_out);
    }
    recorded = false;
  }
  const std::string keep_run =
      recorded && !reported.run_id().empty() ? reported.run_id() : "";
  RegisterWorkerResponse response;
  std::vector<std::string> devices(request.capabilities().devices().begin(),
                                   request.capabilities().devices().end());
  // The run this learner held, if it comes back without it (restarted).
  std::string dropped_run, dropped_actor_run;
  if (const SchedulerWorker* before = scheduler_.worker(request.worker_name());
      before != nullptr) {
    (before->role == LEARNER ? dropped_run : dropped_actor_run) =
        before->run_id;
  }
  *response.mutable_lease() =
      scheduler_.Register(request.worker_name(), role, std::move(devices),
                          request.address(), keep_run, reported.rank());
  scheduler_.SetRendezvousAddress(request.worker_name(),
                                  request.rendezvous_address());
  scheduler_.SetMemory(request.worker_name(),
                       request.capabilities().memory_bytes());
  if (!dropped_actor_run.empty() &&
      scheduler_.worker(request.worker_name())->run_id != dropped_actor_run) {
    // A restarted actor (its process died): a failure of its run.
    restarted = WorkerFailedLocked(
        dropped_actor_run,
        absl::StrCat("actor ", request.worker_name(), " restarted"));
  }
  if (!dropped_run.empty() &&
      scheduler_.worker(request.worker_name())->run_id != dropped_run) {
    // Its old process is gone with the gang's state: restart the gang now
    // rather than after a lease period.
    auto changed = RestartGangLocked(
        dropped_run,
        absl::StrCat("learner ", request.worker_name(), " restarted"));
    if (changed.ok()) restarted = *std::move(changed);
  }
  if (!recovered_run_gone.empty() && recovered_run_gone != keep_run) {
    if (auto run = store_->GetRun(recovered_run_gone);
        run.ok() && run->state() == RUNNING) {
      // Not the run's failure: the coordinator went away, and its learner
      // with it.
      RequeueLocked(recovered_run_gone,
                    absl::StrCat("learner ", name,
                                 " came back without its assignment after "
                                 "the coordinator restarted"));
      if (auto changed = store_->GetRun(recovered_run_gone); changed.ok()) {
        restarted = *std::move(changed);
      }
    }
  }
  if (!keep_run.empty() &&
      scheduler_.worker(request.worker_name())->run_id == keep_run) {
    // Kept: the same assignment id, so the worker does not restart.
    assignment_ids_[request.worker_name()] = reported.assignment_id();
    assigned_placement_[request.worker_name()] =
        scheduler_.worker(request.worker_name())->placement;
    next_assignment_id_ =
        std::max(next_assignment_id_, reported.assignment_id());
  } else if (assignment_ids_.erase(request.worker_name()) > 0) {
    assigned_placement_.erase(request.worker_name());
    store_->ClearAssignment(request.worker_name()).IgnoreError();
  }
  // The same key for the process that showed it; a new one otherwise, so
  // that an earlier holder of the name can no longer act for it.
  response.set_worker_id(name);
  response.set_worker_key(keys_.Issue(name, /*keep=*/has_key));
  lock.Release();
  if (restarted.has_value()) Notify(*restarted);
  return response;
}

bool CoordinatorCore::NameHeldLocked(const std::string& worker_id) const {
  if (!keys_.Issued(worker_id)) return false;
  const absl::Time now = options_.clock();
  if (const SchedulerWorker* worker = scheduler_.worker(worker_id);
      worker != nullptr) {
    return worker->lease_expiry > now;
  }
  // Known from before this coordinator's start: its process gets a lease
  // to come back with its key.
  return now < started_ + options_.lease_ttl;
}

namespace {

// A heartbeat's device checks within their bounds (proto/coordinator.proto).
absl::Status CheckDeviceChecks(const HeartbeatRequest& request) {
  constexpr int kMaxChecks = 32;
  constexpr size_t kMaxText = 1024;
  if (request.device_checks_size() > kMaxChecks) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_checks: ", request.device_checks_size(),
                     " checks, at most ", kMaxChecks));
  }
  for (int i = 0; i < request.device_checks_size(); ++i) {
    const DeviceCheck& c = request.device_checks(i);
    if (c.check().empty() || c.check().size() > kMaxText ||
        c.detail().size() > kMaxText) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_checks[", i, "]: check must be 1 to ", kMaxText,
                       " bytes and detail at most ", kMaxText));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HeartbeatResponse> CoordinatorCore::Heartbeat(
    const HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(
      CheckWorkerKeyLocked(request.worker_id(), request.worker_key()));
  RETURN_IF_ERROR(CheckDeviceChecks(request));
  HeartbeatResponse response;
  ASSIGN_OR_RETURN(
      *response.mutable_lease(),
      scheduler_.Heartbeat(request.worker_id(), request.lease_epoch()));
  device_checks_[request.worker_id()].assign(request.device_checks().begin(),
                                             request.device_checks().end());
  const SchedulerWorker& worker = *scheduler_.worker(request.worker_id());
  // The worker runs its current assignment: say only that (its id), with no
  // store read and no spec on the wire. Anything else gets it in full.
  if (const int64_t current = CurrentAssignmentIdLocked(worker);
      current >= 0 && current == request.running_assignment_id()) {
    response.mutable_assignment()->set_assignment_id(current);
    return response;
  }
  *response.mutable_assignment() = AssignmentFor(worker);
  return response;
}

namespace {

// Why a run's learner ended it successfully, from its last progress.
std::string SuccessReason(const ReportStatusRequest& request) {
  const RunProgress& p = request.progress();
  if (p.target_reached_at_steps() > 0) {
    return absl::StrCat("target return reached at ",
                        p.target_reached_at_steps(), " steps (mean return ",
                        p.mean_return(), ")");
  }
  return "step budget reached";
}

// A population-based training round's run ends at its round's steps.
std::string SuccessReason(const ReportStatusRequest& request, const Run& run) {
  if (request.progress().target_reached_at_steps() == 0 &&
      run.stop_env_steps() > 0) {
    return absl::StrCat("its round's end reached (", run.stop_env_steps(),
                        " env steps)");
  }
  return SuccessReason(request);
}

}  // namespace

bool CoordinatorCore::HoldsReportedAssignmentLocked(
    const ReportStatusRequest& request, const std::string& run_id) {
  // The id handed out for the worker's placement now (-1 where it was
  // placed again and has not heard of it yet: its reports are of the old).
  const SchedulerWorker* worker = scheduler_.worker(request.worker_id());
  return worker != nullptr && !worker->run_id.empty() &&
         (run_id.empty() || worker->run_id == run_id) &&
         request.assignment_id() == CurrentAssignmentIdLocked(*worker);
}

absl::Status CoordinatorCore::ReportStatus(
    const ReportStatusRequest& untrusted) {
  // What a worker writes is kept and shown to users: cleaned here, once.
  ReportStatusRequest request = untrusted;
  request.set_error(SanitizeReason(untrusted.error()));
  std::string run_id;
  WorkerRole role;
  int rank = 0;
  const auto not_current = [&request] {
    return absl::FailedPreconditionError(absl::StrCat(
        "assignment ", request.assignment_id(), " is not current"));
  };
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(
        CheckWorkerKeyLocked(request.worker_id(), request.worker_key()));
    const SchedulerWorker* worker = scheduler_.worker(request.worker_id());
    if (worker == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("unknown worker ", request.worker_id()));
    }
    if (!HoldsReportedAssignmentLocked(request, "")) {
      return not_current();
    }
    run_id = worker->run_id;
    role = worker->role;
    rank = worker->rank;
    if (role == LEARNER && rank == 0 && request.has_progress()) {
      if (auto mark = progress_marks_.find(run_id);
          mark != progress_marks_.end() &&
          request.progress().env_steps() > mark->second.env_steps) {
        mark->second = {request.progress().env_steps(), options_.clock()};
      }
    }
  }
  // A gang's ranks train in lockstep; rank 0 speaks for the run's progress.
  if (role == LEARNER && request.has_progress() && rank == 0) {
    absl::Status stored = store_->UpdateProgress(run_id, request.progress());
    // A full store must not keep a run from ending (FinishRunLocked).
    const bool ends = request.finished() || !request.error().empty();
    if (!stored.ok() &&
        !(ends && stored.code() == absl::StatusCode::kResourceExhausted)) {
      return stored;
    }
  }
  if (!request.finished() && request.error().empty()) {
    if (auto run = store_->GetRun(run_id); run.ok()) Notify(*run);
    return absl::OkStatus();
  }
  if (role != LEARNER) {
    // Actors end with the run; one that ended alone, with an error, is
    // freed (and topped up again) unless its run has failed too often.
    if (request.error().empty()) return absl::OkStatus();
    std::optional<Run> changed;
    {
      absl::MutexLock lock(&mu_);
      // The lock was let go since the check above: a placement that ended
      // meanwhile (its worker lost, its gang restarted) is not charged
      // again.
      if (!HoldsReportedAssignmentLocked(request, run_id)) return not_current();
      scheduler_.ReleaseWorker(request.worker_id());
      std::string reason =
          absl::StrCat("actor ", request.worker_id(), ": ", request.error());
      auto current = store_->GetRun(run_id);
      // Only an operator-trusted worker (one that showed its credential)
      // fails a run in one report; anyone else's fatal report is its own
      // failure, counted against max_worker_failures like a crash.
      const bool trusted = !options_.tokens_required ||
                           credentialed_.count(request.worker_id()) > 0;
      if (request.fatal() && !trusted) {
        absl::StrAppend(&reason,
                        " (a fatal report from a worker without an operator-"
                        "issued credential counts as its own failure)");
      }
      if (request.fatal() && trusted && current.ok() &&
          (current->state() == RUNNING || current->state() == PLACING)) {
        // It would fail the same way on every actor: no retries.
        RL_LOG_WARNING("run {} fails: {}", run_id, reason);
        auto failed = FinishRunLocked(run_id, FAILED, reason);
        if (failed.ok()) changed = *std::move(failed);
      } else {
        changed = WorkerFailedLocked(run_id, reason);
      }
    }
    if (changed.has_value()) Notify(*changed);
    return absl::OkStatus();
  }
  // A gang ends together: rank 0's end (with its progress) ends the run;
  // any rank's error does.
  if (rank != 0 && request.error().empty()) return absl::OkStatus();
  absl::StatusOr<Run> run;
  {
    absl::MutexLock lock(&mu_);
    if (!HoldsReportedAssignmentLocked(request, run_id)) return not_current();
    if (request.retryable()) {
      run = RestartGangLocked(run_id, request.error());
    } else if (request.error().empty()) {
      const absl::StatusOr<Run> current = store_->GetRun(run_id);
      run = FinishRunLocked(run_id, SUCCEEDED,
                            current.ok() ? SuccessReason(request, *current)
                                         : SuccessReason(request));
    } else {
      run = FinishRunLocked(run_id, FAILED, request.error());
    }
  }
  RETURN_IF_ERROR(run.status());
  Notify(*run);
  return absl::OkStatus();
}

ListWorkersResponse CoordinatorCore::ListWorkers() {
  absl::MutexLock lock(&mu_);
  ListWorkersResponse response;
  for (const SchedulerWorker& w : scheduler_.workers()) {
    Worker* out = response.add_workers();
    out->set_worker_id(w.worker_id);
    out->set_worker_name(w.worker_id);
    out->mutable_capabilities()->set_role(w.role);
    for (const auto& d : w.devices) out->mutable_capabilities()->add_devices(d);
    out->set_address(w.address);
    *out->mutable_assignment() = AssignmentFor(w);
    // Users never see secrets: the run key is for the run's workers only.
    out->mutable_assignment()->clear_run_key();
    out->set_alive(true);
    if (auto it = device_checks_.find(w.worker_id);
        it != device_checks_.end()) {
      out->mutable_device_checks()->Add(it->second.begin(), it->second.end());
    }
  }
  // Known from before a restart, not registered again (yet).
  for (const auto& [name, a] : recovered_assignments_) {
    Worker* out = response.add_workers();
    out->set_worker_id(name);
    out->set_worker_name(name);
    out->mutable_capabilities()->set_role(a.role);
    out->mutable_assignment()->set_run_id(a.run_id);
    out->mutable_assignment()->set_rank(a.rank);
    out->mutable_assignment()->set_assignment_id(a.assignment_id);
    out->set_alive(false);
  }
  return response;
}

void CoordinatorCore::ForgetWorkersNotBackLocked() {
  for (const auto& [name, a] : recovered_assignments_) {
    RL_LOG_WARNING(
        "worker {} did not re-register within a lease ({}) of this "
        "coordinator's start: it is taken as lost with its assignment to run "
        "{}",
        name, absl::FormatDuration(options_.lease_ttl), a.run_id);
    if (scheduler_.worker(name) == nullptr) keys_.Forget(name);
    if (absl::Status removed = store_->RemoveWorker(name); !removed.ok()) {
      RL_LOG_WARNING("cannot remove lost worker {} from the store: {}", name,
                     removed.ToString());
    }
  }
  recovered_assignments_.clear();
}

}  // namespace rl
