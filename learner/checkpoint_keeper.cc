#include "learner/checkpoint_keeper.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "telemetry/client/emitter.h"

namespace rl {

CheckpointKeeper::CheckpointKeeper(Options options)
    : options_(std::move(options)) {}

std::string CheckpointKeeper::root() const {
  return (std::filesystem::path(options_.run_dir) / "checkpoints").string();
}

absl::StatusOr<std::string> CheckpointKeeper::Latest() const {
  return LatestCheckpoint(root());
}

void CheckpointKeeper::Resumed(int64_t updates) {
  absl::MutexLock lock(&mu_);
  counts_.updates = updates;
}

absl::Status CheckpointKeeper::Write(int64_t updates, int64_t env_steps,
                                     ActorCritic& policy,
                                     torch::optim::Optimizer& optimizer,
                                     const TensorMap& extra) {
  const absl::Status first =
      write_first_ ? write_first_(updates) : absl::OkStatus();
  const absl::StatusOr<std::string> dir =
      first.ok() ? WriteCheckpoint(root(), updates, policy, optimizer, extra,
                                   options_.keep)
                 : absl::StatusOr<std::string>(first);
  int64_t failures, recovered_after = 0;
  {
    absl::MutexLock lock(&mu_);
    if (dir.ok()) {
      counts_.updates = updates;
      ++counts_.written;
      recovered_after = counts_.consecutive_failures;
      counts_.consecutive_failures = 0;
    } else {
      ++counts_.failures;
      ++counts_.consecutive_failures;
    }
    failures = counts_.failures;
  }
  if (options_.emitter != nullptr) {
    options_.emitter->Emit("learner/checkpoint_failures", env_steps,
                           static_cast<double>(failures));
  }
  if (!dir.ok()) return dir.status();
  if (recovered_after > 0) {
    RL_LOG_INFO("checkpoint {} written after {} failed attempts", *dir,
                recovered_after);
  }
  RL_LOG_DEBUG("checkpoint {}", *dir);
  return absl::OkStatus();
}

absl::Status CheckpointKeeper::WritePeriodic(int64_t updates, int64_t env_steps,
                                             ActorCritic& policy,
                                             torch::optim::Optimizer& optimizer,
                                             const TensorMap& extra) {
  const absl::Status written =
      Write(updates, env_steps, policy, optimizer, extra);
  if (written.ok()) return absl::OkStatus();
  const int64_t in_a_row = counts().consecutive_failures;
  const int limit = std::max(1, options_.max_failures);
  if (in_a_row < limit) {
    RL_LOG_ERROR(
        "checkpoint failed ({} in a row; the run fails at {}), training "
        "goes on and the next interval tries again: {}",
        in_a_row, limit, written.ToString());
    return absl::OkStatus();
  }
  return absl::Status(
      written.code(),
      absl::StrCat(in_a_row,
                   " checkpoints in a row failed (the limit, "
                   "max_checkpoint_failures, is ",
                   limit, "; ", LatestText(), "): ", written.message()));
}

absl::Status CheckpointKeeper::WriteFinal(int64_t updates, int64_t env_steps,
                                          ActorCritic& policy,
                                          torch::optim::Optimizer& optimizer,
                                          const TensorMap& extra) {
  const absl::Status written =
      Write(updates, env_steps, policy, optimizer, extra);
  if (written.ok()) return absl::OkStatus();
  // The run's end is not durable: it fails (its last checkpoint resumes).
  return absl::Status(written.code(),
                      absl::StrCat("the final checkpoint failed (",
                                   LatestText(), "): ", written.message()));
}

CheckpointCounts CheckpointKeeper::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::string CheckpointKeeper::LatestText() const {
  const absl::StatusOr<std::string> latest = Latest();
  return latest.ok()
             ? absl::StrCat("the latest complete checkpoint is still ", *latest)
             : "there is no complete checkpoint";
}

}  // namespace rl
