// CoordinatorCore's failure policy: a run's budget of worker failures, gang
// restarts, runs without progress, and queued runs that can never be placed.
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/coordinator_core.h"

namespace rl {

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

}  // namespace rl
