// Self-play against a league of frozen past versions (RunSpec.league): in
// each environment copy of A agents the trained policy plays seat c mod A
// (copy c) and a frozen version drawn from the pool plays the others. The
// version is drawn when the copy's game begins, by the run's sampling:
// "latest", "uniform" over the pool, or "pfsp" (prioritised fictitious
// self-play: weight (1 - p)^2, p the trained policy's win rate against
// that version so far). Every `snapshot_interval` updates a frozen copy of
// the trained policy joins the pool as the next version; the oldest beyond
// `pool_size` leave it. Fixed members (league.members: TorchScript files,
// loaded when the league is made) play their share of the games beside the
// pool, member k as version -(k + 1). Every trained seat's episode is a
// match: its return against the opponent's version. Where agents leave
// early (env.agents_leave) the copy's game goes on after the trained seat
// has left; its next opponent is drawn when the game's last agent has left
// (its next step starts a new game).
#ifndef RL_ACTOR_LEAGUE_H_
#define RL_ACTOR_LEAGUE_H_

#include <torch/script.h>
#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actor/segment_collector.h"
#include "common/league_matches.h"
#include "policy/actor_critic.h"
#include "policy/fused_policy.h"
#include "policy/fused_rows.h"
#include "proto/common.pb.h"

namespace rl {

// A pool member's results against the trained policy, from its side:
// wins count 1, draws 0.5.
struct OpponentRecord {
  int64_t version = 0;
  double learner_score = 0;  // the trained policy's wins + draws / 2
  int64_t games = 0;
};

// The weights of drawing each of `pool`'s members (oldest first) under
// `sampling` ("latest", "uniform", "pfsp"). pfsp's win rate is (score +
// 0.5) / (games + 1), so an untried version counts as even.
std::vector<double> OpponentWeights(const std::string& sampling,
                                    const std::vector<OpponentRecord>& pool);

class League final : public RowOpponents {
 public:
  // The pool's first version is `policy` as it is now; every member's
  // file is loaded (INVALID_ARGUMENT naming league.members[k].policy_file
  // where one cannot be). `rows` is the batch's rows. `updates`: the updates
  // `policy` has made (an actor joining a run under way); the first version is
  // updates / snapshot_interval (0 for a new run), and the next follows it.
  // `seed` (default: the run's) seeds the opponents' draws and actions: each
  // actor of a run passes its own.
  static absl::StatusOr<std::unique_ptr<League>> Create(
      const RunSpec& spec, ActorCritic& policy, int64_t rows,
      int64_t updates = 0, std::optional<uint64_t> seed = std::nullopt);

  // The trained seats' rows: learner_rows().
  const torch::Tensor& policy_rows() const override { return learner_rows_; }
  absl::Status Act(const torch::Tensor& observations,
                   const torch::Tensor& masks, torch::Tensor actions) override;
  void StepEnded(const uint8_t* terminated, const uint8_t* truncated,
                 const float* episode_returns, const int32_t* episode_lengths,
                 const uint8_t* alive) override;

  // After update number `updates` (the run is at `env_steps`): a frozen
  // copy of `policy` joins the pool every snapshot_interval updates, as
  // version updates / snapshot_interval. Updates may be skipped (an actor
  // sees the learner's versions as it takes them): the first call at or
  // past a multiple snapshots.
  absl::Status AfterUpdate(int64_t updates, int64_t env_steps,
                           ActorCritic& policy);

  // Versions frozen before this league began (the learner's pool, which an
  // actor that starts again is sent: PolicyUpdate.league_pool), oldest
  // first: those older than the league's first version join its pool, with
  // no games yet, and the oldest beyond league.pool_size leave it again.
  // The networks are copied. Returns how many joined (before that pruning).
  absl::StatusOr<int64_t> AdoptEarlier(
      const std::vector<std::pair<int64_t, ActorCritic>>& versions);

  // The trained seats' rows, [copies] int64: c * A + c mod A.
  const torch::Tensor& learner_rows() const { return learner_rows_; }
  // What ended since the last call: the trained seats' episodes (returns
  // and lengths) and the matches.
  std::vector<float> TakeLearnerReturns();
  std::vector<int32_t> TakeLearnerLengths();
  std::vector<LeagueMatch> TakeMatches();

  // The next version the trained policy becomes.
  int64_t next_version() const { return next_version_; }
  std::vector<OpponentRecord> records() const {
    return {pool_.begin(), pool_.end()};
  }
  // The members' results, in league.members' order (versions -1, -2, ...).
  std::vector<OpponentRecord> member_records() const;
  // "pool v3-v12 (10 versions); against it the last 100 games: won 61%,
  // drew 3%, lost 36%".
  std::string Describe() const;

  // Everything needed to continue exactly (pool weights, records, each
  // copy's opponent, the draws' streams), under "league." keys.
  void SaveState(std::map<std::string, torch::Tensor>* state) const;
  absl::Status RestoreState(const std::map<std::string, torch::Tensor>& state);

 private:
  League(const RunSpec& spec, int64_t rows, uint64_t seed);
  // A new network of the run's shape with `policy`'s weights, on its device.
  absl::StatusOr<ActorCritic> Freeze(ActorCritic& policy) const;
  int64_t DrawOpponent();
  OpponentRecord* Find(int64_t version);
  // Member `version` (< 0) acts for `rows`.
  absl::Status MemberAct(int64_t version, const torch::Tensor& observations,
                         const torch::Tensor& masks, const torch::Tensor& rows,
                         torch::Tensor& actions);
  void Prune();

  RunSpec spec_;
  int agents_;
  int64_t copies_;
  torch::Tensor learner_rows_;
  std::deque<OpponentRecord> pool_;  // oldest first
  // The fixed members (league.members), version -(k + 1) at index k.
  struct Member {
    torch::jit::Module module;
    bool takes_mask = false;  // its forward has a second input
    OpponentRecord record;
  };
  std::vector<Member> members_;
  // Every version in the pool or still playing a game begun before it
  // left the pool.
  std::map<int64_t, ActorCritic> frozen_;
  // Per frozen version that has played, the fused CPU kernels bound to its
  // weights (null where they do not run it, execution.cpu_kernels).
  std::map<int64_t, std::unique_ptr<FusedRows>> fused_;
  std::vector<int64_t> opponent_of_copy_;
  // Per copy, 1 while its trained seat has left a game the others still
  // play (env.agents_leave): the next opponent is drawn when it ends.
  std::vector<uint8_t> waiting_;
  // Per playing version, its rows (every seat but the trained one of the
  // copies it plays); rebuilt after a draw.
  std::map<int64_t, torch::Tensor> rows_of_version_;
  bool rows_stale_ = true;
  int64_t next_version_ = 1;
  int64_t env_steps_ = 0;
  std::mt19937_64 draws_;
  torch::Generator actions_;
  std::vector<float> learner_returns_;
  std::vector<int32_t> learner_lengths_;
  std::vector<LeagueMatch> matches_;
  std::deque<float> recent_;  // the last 100 games' trained returns
};

}  // namespace rl

#endif  // RL_ACTOR_LEAGUE_H_
