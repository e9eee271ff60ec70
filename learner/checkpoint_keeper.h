// What a learner does with its checkpoints: writes them under
// <run_dir>/checkpoints (rank 0 writes the gang's), keeps the newest
// `keep`, counts writes and failures ("learner/checkpoint_failures"), and
// decides what a failure means: a periodic checkpoint that fails is tried
// again at the next interval (a full disk may be freed meanwhile) until
// `max_failures` in a row fail the run with the write's status; the final
// one, with no next interval, fails the run at once. Errors say where a
// restart would resume.
#ifndef RL_LEARNER_CHECKPOINT_KEEPER_H_
#define RL_LEARNER_CHECKPOINT_KEEPER_H_

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "learner/checkpoint.h"
#include "policy/actor_critic.h"

namespace rl {

class Emitter;

struct CheckpointCounts {
  int64_t written = 0;
  int64_t failures = 0;
  int64_t consecutive_failures = 0;
  // The updates the newest checkpoint written (or resumed from) holds.
  int64_t updates = 0;
};

class CheckpointKeeper {
 public:
  struct Options {
    std::string run_dir;  // empty: no checkpoints
    int keep = 3;
    int max_failures = 5;        // values below 1 mean 1
    Emitter* emitter = nullptr;  // not owned; null: no metrics
  };
  explicit CheckpointKeeper(Options options);

  bool enabled() const { return !options_.run_dir.empty(); }
  std::string root() const;
  // The newest complete checkpoint; NOT_FOUND if none.
  absl::StatusOr<std::string> Latest() const;
  // The run resumed from a checkpoint holding `updates`.
  void Resumed(int64_t updates);
  // Called before each checkpoint of the run is written, with its
  // `updates` (the other policies of a policies block write theirs there:
  // a resume looks for the run's, and theirs must be there by then); its
  // failure is the checkpoint's. Set before the first write.
  void set_write_first(std::function<absl::Status(int64_t)> write_first) {
    write_first_ = std::move(write_first);
  }

  // Writes and counts checkpoint `updates`; returns the write's status.
  absl::Status Write(int64_t updates, int64_t env_steps, ActorCritic& policy,
                     torch::optim::Optimizer& optimizer,
                     const TensorMap& extra);
  // A periodic checkpoint: OK after a failure until max_failures in a row.
  absl::Status WritePeriodic(int64_t updates, int64_t env_steps,
                             ActorCritic& policy,
                             torch::optim::Optimizer& optimizer,
                             const TensorMap& extra);
  // The run's last checkpoint: any failure fails the run.
  absl::Status WriteFinal(int64_t updates, int64_t env_steps,
                          ActorCritic& policy,
                          torch::optim::Optimizer& optimizer,
                          const TensorMap& extra);

  CheckpointCounts counts() const;

 private:
  // Where a restart would resume, for messages.
  std::string LatestText() const;

  const Options options_;
  std::function<absl::Status(int64_t)> write_first_;
  mutable absl::Mutex mu_;
  CheckpointCounts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_LEARNER_CHECKPOINT_KEEPER_H_
