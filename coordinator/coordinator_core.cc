// CoordinatorCore's runs: creation and recovery from the store, submit, get,
// list and cancel, how runs go back to the queue or end, the placement loop
// (Tick) and the watchers told of every change. Workers are
// coordinator_workers.cc, assignments coordinator_assignments.cc, the
// failure policy coordinator_failure_policy.cc.
#include "coordinator/coordinator_core.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/status.h"
#include "coordinator/run_admission.h"
#include "coordinator/worker_keys.h"

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
      incarnation_(NewToken().substr(0, 12)),
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
    const SubmitRunRequest& request, const std::string& owner,
    const RunRound& round) {
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
                          options_.max_queued_runs_per_user, round);
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

void CoordinatorCore::LoseWorkerLocked(const LostWorker& lost,
                                       const std::string& reason,
                                       std::vector<Run>* changed) {
  assigned_placement_.erase(lost.worker_id);
  assignment_ids_.erase(lost.worker_id);
  device_checks_.erase(lost.worker_id);
  keys_.Forget(lost.worker_id);  // the name is free again
  if (absl::Status removed = store_->RemoveWorker(lost.worker_id);
      !removed.ok()) {
    RL_LOG_WARNING("cannot remove lost worker {} from the store: {}",
                   lost.worker_id, removed.ToString());
  }
  // Where an earlier loss of the same gang (in this Tick) requeued the run
  // already, this one is not charged again.
  if (lost.run_id.empty() || scheduler_.queued(lost.run_id)) return;
  if (lost.role == LEARNER) {
    // The gang's state went with it: the run's learners are placed again.
    absl::StatusOr<Run> run = RestartGangLocked(lost.run_id, reason);
    if (run.ok()) changed->push_back(*std::move(run));
    return;
  }
  std::optional<Run> failed = WorkerFailedLocked(lost.run_id, reason);
  if (failed.has_value()) changed->push_back(*failed);
}

void CoordinatorCore::Tick() {
  std::vector<Run> changed;
  {
    absl::MutexLock lock(&mu_);
    // Ends first: room that came back goes to them before new placements.
    pending_ends_.Write(store_.get(), &changed);
    for (const LostWorker& lost : scheduler_.ExpireLeases()) {
      LoseWorkerLocked(
          lost,
          absl::StrCat(lost.role == LEARNER ? "learner " : "actor ",
                       lost.worker_id, " lost (no heartbeat for ",
                       absl::FormatDuration(options_.lease_ttl), ")"),
          &changed);
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
