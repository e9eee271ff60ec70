// CoordinatorCore's assignments: what a placed worker is told (its run, rank,
// peers, checkpoint directory and key), under an id that changes with every
// new placement and is stored to survive a coordinator restart.
#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "coordinator/coordinator_core.h"

namespace rl {

std::string CoordinatorCore::RunKey(const std::string& run_id) const {
  return DeriveKey(options_.key_secret, "run/" + run_id);
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
      // New on every placement of the gang, and with every coordinator
      // process: its ranks never meet an older gang's keys.
      assignment.set_rendezvous_address(learners[0].rendezvous_address);
      assignment.set_gang_id(absl::StrCat(worker.run_id, "/", incarnation_, "-",
                                          learners[0].placement));
    }
  }
  assignment.set_checkpoint_dir(
      (std::filesystem::path(options_.runs_dir) / worker.run_id).string());
  if (worker.role == LEARNER) {
    if (!run->start_from_run().empty()) {
      assignment.set_start_from(
          (std::filesystem::path(options_.runs_dir) / run->start_from_run())
              .string());
    }
    assignment.set_stop_env_steps(run->stop_env_steps());
  }
  assignment.set_assignment_id(assignment_ids_[worker.worker_id]);
  // An actor gets its own key, not the run's: it streams as no other actor.
  assignment.set_run_key(worker.role == ACTOR
                             ? ActorKey(RunKey(worker.run_id), worker.rank)
                             : RunKey(worker.run_id));
  return assignment;
}

}  // namespace rl
