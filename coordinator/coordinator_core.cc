#include "coordinator/coordinator_core.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/status.h"
#include "coordinator/registration_check.h"
#include "coordinator/run_admission.h"

namespace rl {

absl::StatusOr<std::unique_ptr<CoordinatorCore>> CoordinatorCore::Create(
    const CoordinatorOptions& options) {
  ASSIGN_OR_RETURN(auto store,
                   RunStore::Open(options.store_path, options.max_store_bytes));
  CoordinatorOptions with_secret = options;
  ASSIGN_OR_RETURN(with_secret.key_secret,
                   LoadKeySecret(options.key_secret, options.store_path));
  auto core = std::unique_ptr<CoordinatorCore>(
      new CoordinatorCore(with_secret, std::move(store)));
  RETURN_IF_ERROR(core->Recover());
  return core;
}

CoordinatorCore::CoordinatorCore(const CoordinatorOptions& options,
                                 std::unique_ptr<RunStore> store)
    : options_(options),
      store_(std::move(store)),
      started_(options.clock()),
      keys_(options.key_secret, store_.get()),
      scheduler_(options.clock, options.lease_ttl),
      next_assignment_id_(absl::ToUnixMicros(absl::Now())) {
  std::vector<SchedulerWorker> expected;
  for (const auto& [name, role] : options_.fixed_pool) {
    SchedulerWorker w;
    w.worker_id = name;
    w.role = role;
    expected.push_back(std::move(w));
  }
  scheduler_.SetExpectedWorkers(std::move(expected));
}

std::string CoordinatorCore::WorkerCredential(
    const std::string& worker_name) const {
  return WorkerCredentialFromSecret(options_.key_secret, worker_name);
}

std::string CoordinatorCore::RunKey(const std::string& run_id) const {
  return DeriveKey(options_.key_secret, "run/" + run_id);
}

absl::Status CoordinatorCore::CheckWorkerKeyLocked(
    const std::string& worker_id, const std::string& key) const {
  if (keys_.IsKey(worker_id, key)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "worker_key: not the key of worker ", worker_id,
      " (only the process that registered it may act for it; re-register)"));
}

absl::Status CoordinatorCore::Recover() {
  std::string token;
  int recovered = 0;
  absl::MutexLock lock(&mu_);
  std::vector<Run> all;
  do {
    ASSIGN_OR_RETURN(
        std::vector<Run> page,
        store_->ListRuns({QUEUED, PLACING, RUNNING}, 1000, token, &token));
    all.insert(all.end(), page.begin(), page.end());
  } while (!token.empty());
  // Oldest first, so the queue keeps submission order.
  std::reverse(all.begin(), all.end());
  for (const Run& run : all) {
    if (run.state() == RUNNING) {
      scheduler_.MarkPlaced(run.run_id(), run.spec());
      progress_marks_[run.run_id()] = {run.progress().env_steps(),
                                       options_.clock()};
    } else {
      scheduler_.Enqueue(run.run_id(), run.spec(), ++next_order_);
    }
    ++recovered;
  }
  RETURN_IF_ERROR(keys_.Load());
  ASSIGN_OR_RETURN(std::vector<AssignmentRecord> assignments,
                   store_->Assignments());
  for (AssignmentRecord& a : assignments) {
    recovered_assignments_[a.worker_id] = std::move(a);
  }
  if (recovered > 0) {
    RL_LOG_INFO("recovered {} unfinished runs, {} worker assignments",
                recovered, recovered_assignments_.size());
  }
  return absl::OkStatus();
}

absl::StatusOr<SubmitRunResponse> CoordinatorCore::SubmitRun(
    const SubmitRunRequest& request, const std::string& owner) {
  ASSIGN_OR_RETURN(const RunSpec spec,
                   AdmitRunSpec(request, options_.footprint_limits));
  if (request.idempotency_key().size() > 256) {
    return absl::InvalidArgumentError("idempotency_key: at most 256 bytes");
  }
  SubmitRunResponse response;
  bool created = false;
  {
    absl::MutexLock lock(&mu_);
    if (const std::string never = scheduler_.WhyNeverPlaced(spec);
        !never.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this system's workers can never hold this run (its pool is fixed: "
          "--local_workers): ",
          never));
    }
    absl::StatusOr<Run> run =
        store_->SubmitRun(spec, request.idempotency_key(), &created, owner,
                          options_.max_queued_runs_per_user);
    if (run.status().code() == absl::StatusCode::kResourceExhausted) {
      ++refused_by_user_quota_;
    }
    if (!run.ok()) return run.status();
    *response.mutable_run() = *std::move(run);
    if (created) {
      scheduler_.Enqueue(response.run().run_id(), spec, ++next_order_);
    }
  }
  response.set_created(created);
  if (created) Notify(response.run());
  return response;
}

absl::StatusOr<Run> CoordinatorCore::GetRun(const std::string& run_id,
                                            bool with_history) {
  ASSIGN_OR_RETURN(Run run, store_->GetRun(run_id));
  run.set_checkpoint_dir(
      (std::filesystem::path(options_.runs_dir) / run_id).string());
  if (with_history) {
    ASSIGN_OR_RETURN(std::vector<RunEventRecord> events,
                     store_->Events(run_id));
    const size_t first =
        events.size() > kMaxHistory ? events.size() - kMaxHistory : 0;
    for (size_t i = first; i < events.size(); ++i) {
      RunTransition* t = run.add_history();
      const int64_t ns = absl::ToUnixNanos(events[i].time);
      t->mutable_time()->set_seconds(ns / 1000000000);
      t->mutable_time()->set_nanos(static_cast<int32_t>(ns % 1000000000));
      t->set_from_state(events[i].from);
      t->set_to_state(events[i].to);
      t->set_reason(events[i].reason);
    }
  }
  absl::MutexLock lock(&mu_);
  pending_ends_.Apply(&run);
  if (run.state() == QUEUED || run.state() == PLACING) {
    run.set_waiting_reason(scheduler_.WhyWaiting(run_id));
  }
  return run;
}

absl::StatusOr<ListRunsResponse> CoordinatorCore::ListRuns(
    const ListRunsRequest& request) {
  if (request.page_size() < 0 || request.page_size() > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size: must be in [0, 1000] (got ", request.page_size(), ")"));
  }
  std::vector<RunState> states;
  for (int s : request.states()) states.push_back(static_cast<RunState>(s));
  ListRunsResponse response;
  std::string next;
  ASSIGN_OR_RETURN(std::vector<Run> runs,
                   store_->ListRuns(states, request.page_size(),
                                    request.page_token(), &next));
  absl::MutexLock lock(&mu_);
  for (Run& run : runs) {
    pending_ends_.Apply(&run);
    if (!states.empty() &&
        std::find(states.begin(), states.end(), run.state()) == states.end()) {
      continue;  // its end is not written yet, and not asked for
    }
    *response.add_runs() = std::move(run);
  }
  response.set_next_page_token(next);
  return response;
}

absl::Status CheckOwnerOrAdmin(const std::string& what,
                               const std::string& owner, const Requester& by) {
  if (by.admin || by.name == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      what, " belongs to ", owner.empty() ? "nobody" : owner, "; ", by.name,
      " may not change it (only its owner or an "
      "admin may)"));
}

absl::StatusOr<Run> CoordinatorCore::CancelRunFor(const std::string& run_id,
                                                  const Requester& by) {
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(const Run run, store_->GetRun(run_id));
    RETURN_IF_ERROR(
        CheckOwnerOrAdmin(absl::StrCat("run ", run_id), run.owner(), by));
  }
  return CancelRun(run_id, absl::StrCat("cancelled by ", by.name));
}

absl::StatusOr<Run> CoordinatorCore::CancelRun(const std::string& run_id,
                                               const std::string& reason) {
  Run run;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(run, store_->GetRun(run_id));
    if (run.state() == SUCCEEDED || run.state() == FAILED ||
        run.state() == CANCELLED) {
      return run;  // Idempotent.
    }
    pending_ends_.Apply(&run);
    if (run.state() == SUCCEEDED || run.state() == FAILED ||
        run.state() == CANCELLED) {
      return run;  // Ended, not yet written.
    }
    ASSIGN_OR_RETURN(run, FinishRunLocked(run_id, CANCELLED, reason));
  }
  Notify(run);
  return run;
}

void CoordinatorCore::NoteWorkerExit(const std::string& worker_name,
                                     const std::string& how) {
  absl::MutexLock lock(&mu_);
  if (exit_notes_.size() < 4096) exit_notes_[worker_name] = how;
}

std::string CoordinatorCore::ExitNoteLocked(const std::string& worker_name) {
  auto it = exit_notes_.find(worker_name);
  if (it == exit_notes_.end()) return "";
  std::string note = absl::StrCat(" (its process ", it->second, ")");
  exit_notes_.erase(it);
  return note;
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
        absl::StrCat("actor ", request.worker_name(), " restarted",
                     ExitNoteLocked(request.worker_name())));
  }
  if (!dropped_run.empty() &&
      scheduler_.worker(request.worker_name())->run_id != dropped_run) {
    // Its old process is gone with the gang's state: restart the gang now
    // rather than after a lease period.
    auto changed = RestartGangLocked(
        dropped_run,
        absl::StrCat("learner ", request.worker_name(), " restarted",
                     ExitNoteLocked(request.worker_name())));
    if (changed.ok()) restarted = *std::move(changed);
  }
  exit_notes_.erase(request.worker_name());  // said above, or of no run
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

int64_t CoordinatorCore::CurrentAssignmentIdLocked(
    const SchedulerWorker& worker) const {
  const auto id = assignment_ids_.find(worker.worker_id);
  if (worker.run_id.empty()) return id == assignment_ids_.end() ? 0 : -1;
  const auto placed = assigned_placement_.find(worker.worker_id);
  if (placed == assigned_placement_.end() ||
      placed->second != worker.placement || id == assignment_ids_.end()) {
    return -1;  // a new assignment: AssignmentFor makes it
  }
  return id->second;
}

Assignment CoordinatorCore::AssignmentFor(const SchedulerWorker& worker) {
  Assignment assignment;
  if (worker.run_id.empty()) {
    assigned_placement_.erase(worker.worker_id);
    if (assignment_ids_.erase(worker.worker_id) > 0) {
      store_->ClearAssignment(worker.worker_id).IgnoreError();
    }
    return assignment;
  }
  auto placed = assigned_placement_.find(worker.worker_id);
  if (placed == assigned_placement_.end() ||
      placed->second != worker.placement) {
    assigned_placement_[worker.worker_id] = worker.placement;
    assignment_ids_[worker.worker_id] = ++next_assignment_id_;
    AssignmentRecord record;
    record.worker_id = worker.worker_id;
    record.run_id = worker.run_id;
    record.role = worker.role;
    record.rank = worker.rank;
    record.assignment_id = assignment_ids_[worker.worker_id];
    const absl::Status stored = store_->PutAssignment(record);
    if (!stored.ok()) {
      RL_LOG_ERROR("cannot store the assignment of {}: {}", worker.worker_id,
                   stored.ToString());
    }
  }
  auto run = store_->GetRun(worker.run_id);
  if (!run.ok()) return assignment;
  assignment.set_run_id(worker.run_id);
  assignment.set_role(worker.role);
  *assignment.mutable_spec() = run->spec();
  assignment.set_rank(worker.rank);
  std::vector<SchedulerWorker> learners;  // copies: workers() is a copy
  for (SchedulerWorker& w : scheduler_.workers()) {
    if (w.run_id == worker.run_id && w.role == LEARNER) {
      learners.push_back(std::move(w));
    }
  }
  std::sort(learners.begin(), learners.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (const SchedulerWorker& w : learners) {
    assignment.add_learner_addresses(w.address);
  }
  if (worker.role == LEARNER) {
    assignment.set_world_size(
        std::max(1, run->spec().resources().num_learners()));
    if (!learners.empty() && learners[0].rank == 0) {
      // New on every placement of the gang: its ranks never meet an older
      // gang's keys.
      assignment.set_rendezvous_address(learners[0].rendezvous_address);
      assignment.set_gang_id(
          absl::StrCat(worker.run_id, "/", learners[0].placement));
    }
  }
  assignment.set_checkpoint_dir(
      (std::filesystem::path(options_.runs_dir) / worker.run_id).string());
  assignment.set_assignment_id(assignment_ids_[worker.worker_id]);
  // An actor gets its own key, not the run's: it streams as no other actor.
  assignment.set_run_key(worker.role == ACTOR
                             ? ActorKey(RunKey(worker.run_id), worker.rank)
                             : RunKey(worker.run_id));
  return assignment;
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

}  // namespace

absl::Status CoordinatorCore::ReportStatus(
    const ReportStatusRequest& untrusted) {
  // What a worker writes is kept and shown to users: cleaned here, once.
  ReportStatusRequest request = untrusted;
  request.set_error(SanitizeReason(untrusted.error()));
  std::string run_id;
  WorkerRole role;
  int rank = 0;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(
        CheckWorkerKeyLocked(request.worker_id(), request.worker_key()));
    const SchedulerWorker* worker = scheduler_.worker(request.worker_id());
    if (worker == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("unknown worker ", request.worker_id()));
    }
    if (request.assignment_id() != assignment_ids_[request.worker_id()] ||
        worker->run_id.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "assignment ", request.assignment_id(), " is not current"));
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
    if (request.retryable()) {
      run = RestartGangLocked(run_id, request.error());
    } else {
      run = request.error().empty()
                ? FinishRunLocked(run_id, SUCCEEDED, SuccessReason(request))
                : FinishRunLocked(run_id, FAILED, request.error());
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

void CoordinatorCore::RequeueLocked(const std::string& run_id,
                                    const std::string& reason) {
  auto run = store_->GetRun(run_id);
  if (!run.ok()) return;
  if (run->state() == RUNNING) {
    run = store_->Transition(run_id, PLACING, reason);
    if (!run.ok()) return;
  }
  progress_marks_.erase(run_id);
  RL_LOG_WARNING("run {} back in the queue: {}", run_id, reason);
  scheduler_.Enqueue(run_id, run->spec(), ++next_order_);
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

absl::StatusOr<Run> CoordinatorCore::FinishRunLocked(
    const std::string& run_id, RunState to, const std::string& reason) {
  absl::StatusOr<Run> run = store_->Transition(run_id, to, reason);
  if (run.status().code() == absl::StatusCode::kResourceExhausted) {
    ASSIGN_OR_RETURN(Run current, store_->GetRun(run_id));
    RL_LOG_WARNING(
        "run {} ended ({}: {}) but the store is full: the end is kept and "
        "written when there is room ({})",
        run_id, RunState_Name(to), reason, run.status().ToString());
    pending_ends_.Keep(run_id, to, reason);
    pending_ends_.Apply(&current);
    run = std::move(current);
  }
  if (run.ok()) EndRunLocked(run_id);
  return run;
}

void CoordinatorCore::EndRunLocked(const std::string& run_id) {
  scheduler_.Release(run_id);
  progress_marks_.erase(run_id);
  gang_restarts_.erase(run_id);
  worker_failures_.erase(run_id);
  unplaceable_since_.erase(run_id);
}

int64_t CoordinatorCore::runs_with_bookkeeping() {
  absl::MutexLock lock(&mu_);
  std::set<std::string> runs;
  for (const auto& [run_id, restarts] : gang_restarts_) runs.insert(run_id);
  for (const auto& [run_id, times] : worker_failures_) runs.insert(run_id);
  for (const auto& [run_id, since] : unplaceable_since_) runs.insert(run_id);
  return static_cast<int64_t>(runs.size());
}

absl::StatusOr<Run> CoordinatorCore::RestartGangLocked(
    const std::string& run_id, const std::string& reason) {
  ASSIGN_OR_RETURN(Run run, store_->GetRun(run_id));
  if (run.state() != RUNNING && run.state() != PLACING) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " is not running"));
  }
  // One failure budget per run: a gang restart is a worker failure, counted
  // with lost and failed workers against max_worker_failures.
  if (std::optional<Run> failed = WorkerFailedLocked(run_id, reason)) {
    return *std::move(failed);
  }
  const int restarts = ++gang_restarts_[run_id];
  RequeueLocked(run_id, absl::StrCat("gang restart ", restarts, ": ", reason));
  return store_->GetRun(run_id);
}

void CoordinatorCore::Tick() {
  std::vector<Run> changed;
  {
    absl::MutexLock lock(&mu_);
    // Ends first: room that came back goes to them before new placements.
    pending_ends_.Write(store_.get(), &changed);
    for (const LostWorker& lost : scheduler_.ExpireLeases()) {
      assigned_placement_.erase(lost.worker_id);
      assignment_ids_.erase(lost.worker_id);
      device_checks_.erase(lost.worker_id);
      keys_.Forget(lost.worker_id);  // the name is free again
      if (absl::Status removed = store_->RemoveWorker(lost.worker_id);
          !removed.ok()) {
        RL_LOG_WARNING("cannot remove lost worker {} from the store: {}",
                       lost.worker_id, removed.ToString());
      }
      if (lost.run_id.empty()) continue;
      const std::string reason =
          absl::StrCat(lost.role == LEARNER ? "learner " : "actor ",
                       lost.worker_id, " lost (no heartbeat for ",
                       absl::FormatDuration(options_.lease_ttl), ")");
      std::optional<Run> failed = WorkerFailedLocked(lost.run_id, reason);
      if (failed.has_value()) {
        changed.push_back(*failed);
      } else if (lost.role == LEARNER) {
        RequeueLocked(lost.run_id, reason);
      }
    }
    if (options_.clock() - started_ > options_.lease_ttl) {
      for (const std::string& run_id : scheduler_.PlacedRunsWithoutLearners()) {
        RequeueLocked(run_id, "no learner re-registered");
      }
      ForgetWorkersNotBackLocked();
    }
    for (const Placement& p : scheduler_.Place()) {
      auto run = store_->GetRun(p.run_id);
      if (run.ok() && run->state() == QUEUED) {
        run = store_->Transition(p.run_id, PLACING, "workers found");
      }
      if (run.ok()) {
        run = store_->Transition(p.run_id, RUNNING,
                                 absl::StrCat(p.learners.size(), " learners, ",
                                              p.actors.size(), " actors"));
      }
      if (run.ok()) {
        progress_marks_[p.run_id] = {run->progress().env_steps(),
                                     options_.clock()};
        changed.push_back(*run);
      }
    }
    RestartStalledLocked(&changed);
    scheduler_.TopUpActors();
    FailUnplaceableLocked(&changed);
  }
  for (const Run& run : changed) Notify(run);
}

std::optional<Run> CoordinatorCore::WorkerFailedLocked(
    const std::string& run_id, const std::string& reason) {
  auto run = store_->GetRun(run_id);
  if (!run.ok() || (run->state() != RUNNING && run->state() != PLACING)) {
    return std::nullopt;
  }
  std::deque<absl::Time>& times = worker_failures_[run_id];
  const absl::Time now = options_.clock();
  times.push_back(now);
  while (!times.empty() &&
         now - times.front() > options_.worker_failure_window) {
    times.pop_front();
  }
  const int failures = static_cast<int>(times.size());
  RL_LOG_WARNING("run {}: worker failure {} of at most {} in {}: {}", run_id,
                 failures, options_.max_worker_failures,
                 absl::FormatDuration(options_.worker_failure_window), reason);
  if (failures <= options_.max_worker_failures) return std::nullopt;
  run = FinishRunLocked(
      run_id, FAILED,
      absl::StrCat("its workers failed ", failures, " times within ",
                   absl::FormatDuration(options_.worker_failure_window),
                   " (limit ", options_.max_worker_failures,
                   "); last: ", reason));
  if (!run.ok()) return std::nullopt;
  return *run;
}

void CoordinatorCore::RestartStalledLocked(std::vector<Run>* changed) {
  if (options_.max_time_without_progress <= absl::ZeroDuration()) return;
  const absl::Time now = options_.clock();
  std::vector<std::pair<std::string, ProgressMark>> stalled;
  for (const auto& [run_id, mark] : progress_marks_) {
    if (now - mark.since > options_.max_time_without_progress) {
      stalled.emplace_back(run_id, mark);
    }
  }
  for (const auto& [run_id, mark] : stalled) {
    progress_marks_.erase(run_id);
    absl::StatusOr<Run> run = RestartGangLocked(
        run_id,
        absl::StrCat("no progress for ", absl::FormatDuration(now - mark.since),
                     " (limit ",
                     absl::FormatDuration(options_.max_time_without_progress),
                     "): the learner reported no new environment steps "
                     "after ",
                     mark.env_steps, " (no segment reached it, or no update)"));
    if (run.ok()) changed->push_back(*run);
  }
}

void CoordinatorCore::FailUnplaceableLocked(std::vector<Run>* changed) {
  const absl::Time now = options_.clock();
  std::map<std::string, absl::Time> still;
  for (const std::string& run_id : scheduler_.QueuedRuns()) {
    if (scheduler_.CouldEverPlace(run_id)) continue;
    if (scheduler_.pool_fixed()) {  // no other worker will come
      auto run = FinishRunLocked(
          run_id, FAILED,
          absl::StrCat("this system's workers can never hold it (its pool is "
                       "fixed: --local_workers): ",
                       scheduler_.WhyNeverPlaced(run_id)));
      if (run.ok()) {
        changed->push_back(*run);
      } else {
        EndRunLocked(run_id);
      }
      continue;
    }
    auto since = unplaceable_since_.find(run_id);
    const absl::Time first =
        since == unplaceable_since_.end() ? now : since->second;
    if (options_.unplaceable_timeout <= absl::ZeroDuration() ||
        now - first < options_.unplaceable_timeout) {
      still[run_id] = first;
      continue;
    }
    const std::string why = scheduler_.WhyWaiting(run_id);
    auto run = FinishRunLocked(
        run_id, FAILED,
        absl::StrCat("cannot be placed on the registered workers for ",
                     absl::FormatDuration(now - first), " (limit ",
                     absl::FormatDuration(options_.unplaceable_timeout),
                     "): ", why));
    if (run.ok()) {
      changed->push_back(*run);
    } else {
      EndRunLocked(run_id);
    }
  }
  unplaceable_since_ = std::move(still);
}

int64_t CoordinatorCore::Watch(std::function<void(const Run&)> on_change) {
  absl::MutexLock lock(&watchers_mu_);
  watchers_[++next_watcher_] = std::move(on_change);
  return next_watcher_;
}

void CoordinatorCore::Unwatch(int64_t id) {
  absl::MutexLock lock(&watchers_mu_);
  watchers_.erase(id);
}

void CoordinatorCore::Notify(const Run& run) {
  absl::MutexLock lock(&watchers_mu_);
  for (const auto& [id, callback] : watchers_) callback(run);
}

}  // namespace rl
