// A learner's progress through its run: env steps, updates, the published
// policy version, episodes, the last episodes' returns, when the target was
// reached, and steps per second since it started; saved in and restored
// from a TrainingState. Not thread-safe: the core's lock guards it.
#ifndef RL_LEARNER_LEARNER_PROGRESS_H_
#define RL_LEARNER_LEARNER_PROGRESS_H_

#include <cstdint>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "learner/return_window.h"
#include "proto/common.pb.h"
#include "proto/learner.pb.h"
#include "proto/training_state.pb.h"

namespace rl {

class LearnerProgress {
 public:
  // The first policy version a learner publishes.
  static constexpr int64_t kFirstVersion = 1;

  // `stop_env_steps` > 0 ends the run there, before its budget (a
  // population-based training round).
  explicit LearnerProgress(const RunSpec& spec, int64_t stop_env_steps = 0)
      : spec_(spec),
        stop_env_steps_(stop_env_steps),
        policy_returns_(spec.policies_size()),
        policy_episodes_(spec.policies_size(), 0) {}

  int64_t env_steps() const { return env_steps_; }
  int64_t updates() const { return updates_; }
  int64_t policy_version() const { return policy_version_; }
  const ReturnWindow& returns() const { return returns_; }
  // As of the last CountUpdate.
  const RunProgress& run_progress() const { return progress_; }
  // The run's budget of env steps (or its stop) is spent, or its target
  // reached.
  bool Finished() const;
  // Whether `returns` reach the run's target return (none: never).
  bool Reaches(const ReturnWindow& returns) const;

  // One update of `env_steps` (the gang's) was applied; `returns` is the
  // window after it, `episodes` the episodes it saw, `target_reached`
  // whether the gang reached the target with it.
  void CountUpdate(int64_t env_steps, int64_t episodes, ReturnWindow returns,
                   bool target_reached);
  // A run of several policies, before CountUpdate: the episodes of the
  // update by policy (`returns[i]`: policy i's, in the run's order).
  void CountPolicyEpisodes(const std::vector<std::vector<float>>& returns);

  // The counters as LearnerStatus (and its RunProgress) reports them.
  void FillStatus(LearnerStatus* status) const;
  // Counters and returns into `state`, and back (a resumed run; steps per
  // second count from here).
  void Save(TrainingState* state) const;
  void Restore(const TrainingState& state);

 private:
  const RunSpec spec_;
  const int64_t stop_env_steps_;
  int64_t env_steps_ = 0;
  int64_t updates_ = 0;
  int64_t policy_version_ = kFirstVersion;
  int64_t episodes_ = 0;
  ReturnWindow returns_;
  bool target_reached_ = false;
  int64_t target_reached_at_ = 0;
  int64_t steps_at_start_ = 0;
  absl::Time started_ = absl::Now();
  // A run of several policies: each one's window and episodes.
  std::vector<ReturnWindow> policy_returns_;
  std::vector<int64_t> policy_episodes_;
  RunProgress progress_;  // as of the last CountUpdate
  bool counted_ = false;
};

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_PROGRESS_H_
