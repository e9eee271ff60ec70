// The one-process trainer: an actor's collector (the host's, or built-in
// envs with the policy on a GPU: actor/device_collector.h) and a learner's
// PpoUpdater composed in-process (no network), driven by a RunSpec.
//
// Loop: collect one segment (T x E steps) -> PPO update -> progress,
// checkpoint every `checkpoint_interval` updates -> until the step budget or
// the target return (mean of the last 100 episodes) is reached.
#ifndef RL_TRAINER_LOCAL_TRAINER_H_
#define RL_TRAINER_LOCAL_TRAINER_H_

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actor/league.h"
#include "actor/segment_collector.h"
#include "learner/league_games.h"
#include "learner/ppo_updater.h"
#include "learner/return_window.h"
#include "policy/actor_critic.h"
#include "proto/common.pb.h"

namespace rl {

class Emitter;

struct TrainerOptions {
  // Checkpoints go to <run_dir>/checkpoints; empty: no checkpoints.
  std::string run_dir;
  // Threads stepping the environments.
  int env_threads = 1;
  // Metrics (the learner's and actor 0's) go here; not owned; null: none.
  Emitter* emitter = nullptr;
  // Tests: the trained policy is a copy of the acting one even on the CPU,
  // as on a CUDA learner_device (weights copied back after every update),
  // so the CPU runs the GPU path's bookkeeping.
  bool separate_learner_policy_for_testing = false;
};

// Where the time of the run went, in seconds.
struct TimeBreakdown {
  double env = 0;
  double inference = 0;
  double gae = 0;
  double update = 0;  // PPO epochs
  double other = 0;   // checkpoints, bookkeeping
};

// One of a run's several policies (RunSpec.policies) after an update.
struct PolicyProgress {
  std::string name;
  int64_t episodes = 0;  // its agents' episodes
  double mean_return = std::numeric_limits<double>::quiet_NaN();
  UpdateStats last_update;
};

// State after each update, for progress displays.
struct TrainerProgress {
  int64_t env_steps = 0;
  int64_t total_env_steps = 0;
  int64_t updates = 0;
  int64_t episodes = 0;
  double mean_return = 0;  // last 100 episodes; NaN before any
  double seconds = 0;
  double steps_per_second = 0;
  UpdateStats last_update;
  // With a league (RunSpec.league): its pool and the trained policy's last
  // games against it (League::Describe); else empty. Returns and episodes
  // above are then the trained seats'.
  std::string league;
  // With several policies, each one's, in the run's order; the fields above
  // are then the first policy's (target_return too).
  std::vector<PolicyProgress> policies;
};

struct TrainResult {
  TrainerProgress progress;
  bool target_reached = false;
  int64_t target_reached_at_steps = 0;
  TimeBreakdown time;
  std::string last_checkpoint;
};

class LocalTrainer {
 public:
  static absl::StatusOr<std::unique_ptr<LocalTrainer>> Create(
      const RunSpec& spec, const TrainerOptions& options);

  // Restores policy, optimizer, counters, episode window and the collector's
  // exact state from a checkpoint directory.
  absl::Status Restore(const std::string& checkpoint_dir);
  // What the run file changed since the restored checkpoint was written
  // ("modified: ppo.learning_rate: 0.001 -> 0.0005", one line each; the
  // budget, total_env_steps, left out: raising it is how a run goes on).
  // The checkpoint's state goes on under the new settings. Empty when none
  // changed, or the checkpoint predates this record.
  const std::vector<std::string>& run_file_changes() const {
    return run_file_changes_;
  }

  // One segment and one update. A failed update (a rollout with NaN or
  // inf, a diverged loss) is its Status, prefixed with the update's number.
  absl::Status Step();

  // Steps until the budget is used, the target return is reached, or
  // `max_updates` more updates have run (0: no limit). Calls `on_update`
  // after each update. Writes a final checkpoint when checkpoints are on.
  absl::StatusOr<TrainResult> Train(
      const std::function<void(const TrainerProgress&)>& on_update = nullptr,
      int64_t max_updates = 0);

  // Writes the run's checkpoint (<run_dir>/checkpoints) and, with several
  // policies, each other policy's (<run_dir>/policies/<name>/checkpoints,
  // the same number); returns the run's.
  absl::StatusOr<std::string> WriteCheckpoint();

  const TrainerProgress& progress() const { return progress_; }
  ActorCritic& policy() { return policy_; }
  // With several policies, policy `index` of the run's (0: policy()).
  ActorCritic& policy(size_t index) {
    return index == 0 ? policy_ : others_.at(index - 1).policy;
  }
  // The run's league; null without one.
  const League* league() const { return league_.get(); }
  const RunSpec& spec() const { return spec_; }
  bool Done() const;

 private:
  // "policy NAME: " with several policies, else "".
  std::string PolicyPrefix(size_t index) const;
  // A policy of the run's after the first (RunSpec.policies): its own
  // acting and trained networks and updater, and its agents' rows.
  struct OtherPolicy {
    std::string name;
    torch::Tensor rows;
    ActorCritic policy{nullptr};
    ActorCritic learner_policy{nullptr};
    std::unique_ptr<PpoUpdater> updater;
    UpdateStats last_update;
  };

  LocalTrainer(const RunSpec& spec, const TrainerOptions& options,
               std::unique_ptr<SegmentCollector> collector, ActorCritic policy,
               ActorCritic learner_policy, std::unique_ptr<PpoUpdater> updater,
               Rollout rollout);

  RunSpec spec_;
  TrainerOptions options_;
  std::unique_ptr<SegmentCollector> collector_;
  // Acts (on resources.actor_device, where built-in envs step too).
  ActorCritic policy_{nullptr};
  // Trained (resources.learner_device): policy_ itself on the same device,
  // else a copy whose weights policy_ takes after every update.
  ActorCritic learner_policy_{nullptr};
  std::unique_ptr<PpoUpdater> updater_;
  Rollout rollout_;
  // With a league: plays the opponents' rows; the update learns from the
  // trained seats' rows only.
  std::unique_ptr<League> league_;
  // With a league: its games kept in <run_dir>/league/matches.csv, rated
  // and emitted as the learner does.
  std::optional<LeagueGames> league_games_;
  // With several policies: the first's rows (undefined without), the
  // others, and each one's last 100 returns.
  torch::Tensor first_rows_;
  std::vector<OtherPolicy> others_;
  std::vector<ReturnWindow> policy_windows_;
  TrainerProgress progress_;
  ReturnWindow recent_returns_;
  TimeBreakdown time_;
  bool target_reached_ = false;
  int64_t target_reached_at_ = 0;
  double seconds_before_resume_ = 0;
  std::string last_checkpoint_;
  std::vector<std::string> run_file_changes_;
};

// What chooses an evaluation's actions: observations [E, obs], the env's
// action masks (undefined without) and which envs begin an episode with
// these observations ([E] uint8, 1 = a new episode: a recurrent policy
// starts it from a zero state) -> actions of the env's kind.
using EvaluationActor = std::function<absl::StatusOr<torch::Tensor>(
    const torch::Tensor& observations, const torch::Tensor& masks,
    const torch::Tensor& episode_starts)>;

// Plays `episodes` episodes of `spec`'s env (seeded environments) with the
// actions `act` chooses; returns their mean return, and each episode's
// return in `returns` when given. INVALID_ARGUMENT for actions of the wrong
// dtype or shape.
absl::StatusOr<double> EvaluateActions(const RunSpec& spec,
                                       const EvaluationActor& act, int episodes,
                                       uint64_t seed,
                                       std::vector<double>* returns = nullptr);

// The same with `policy`'s deterministic actions (argmax / Gaussian mean).
absl::StatusOr<double> EvaluatePolicy(const RunSpec& spec, ActorCritic& policy,
                                      int episodes, uint64_t seed,
                                      std::vector<double>* returns = nullptr);

// Where every return is a game's score (+1 a win, 0 a draw, -1 a loss:
// two-player games such as LightCycles-v0), "won 61.0%, drew 2.0%, lost
// 37.0%"; else empty.
std::string DescribeGameOutcomes(const std::vector<double>& returns);

}  // namespace rl

#endif  // RL_TRAINER_LOCAL_TRAINER_H_
