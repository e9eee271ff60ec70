#include "actor/league.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "policy/torch_status.h"
#include "runspec/league_rules.h"

namespace rl {
namespace {

constexpr size_t kRecentGames = 100;

// 1 a win, 0.5 a draw, 0 a loss: the sign of the trained seat's return.
double Score(float learner_return) {
  return learner_return > 0 ? 1.0 : learner_return == 0 ? 0.5 : 0.0;
}

}  // namespace

std::vector<double> OpponentWeights(const std::string& sampling,
                                    const std::vector<OpponentRecord>& pool) {
  std::vector<double> w(pool.size(), sampling == "latest" ? 0.0 : 1.0);
  if (pool.empty()) return w;
  if (sampling == "latest") {
    w.back() = 1;
  } else if (sampling == "pfsp") {
    for (size_t i = 0; i < pool.size(); ++i) {
      const double p = (pool[i].learner_score + 0.5) / (pool[i].games + 1.0);
      w[i] = (1 - p) * (1 - p);
    }
  }
  return w;
}

League::League(const RunSpec& spec, int64_t rows, uint64_t seed)
    : spec_(spec),
      agents_(std::max(1, spec.env().agents_per_env())),
      copies_(rows / std::max(1, spec.env().agents_per_env())),
      opponent_of_copy_(copies_, 0),
      waiting_(copies_, 0),
      draws_(seed * 0x9E3779B97F4A7C15ULL + 17),
      actions_(at::detail::createCPUGenerator(seed + 7919)) {
  std::vector<int64_t> learner(copies_);
  for (int64_t c = 0; c < copies_; ++c) learner[c] = c * agents_ + c % agents_;
  learner_rows_ = torch::tensor(learner, torch::kInt64);
}

absl::StatusOr<std::unique_ptr<League>> League::Create(
    const RunSpec& spec, ActorCritic& policy, int64_t rows, int64_t updates,
    std::optional<uint64_t> seed) {
  if (!spec.has_league()) {
    return absl::InvalidArgumentError("league: the run has none");
  }
  if (spec.env().agents_per_env() < 2 ||
      rows % spec.env().agents_per_env() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "league: needs whole copies of 2 or more agents (rows ", rows,
        ", env.agents_per_env ", spec.env().agents_per_env(), ")"));
  }
  // A program's spec may not have been through ResolveRunSpec.
  RunSpec resolved = spec;
  ApplyLeagueDefaults(resolved.mutable_league());
  if (const std::vector<std::string> problems = LeagueProblems(resolved);
      !problems.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  }
  if (updates < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("league: updates must be >= 0 (got ", updates, ")"));
  }
  std::unique_ptr<League> league(
      new League(resolved, rows, seed.value_or(resolved.seed())));
  for (int k = 0; k < resolved.league().members_size(); ++k) {
    const LeagueMember& m = resolved.league().members(k);
    Member member;
    member.record.version = -(k + 1);
    RETURN_IF_ERROR(CatchTorchErrors(
        absl::StrCat("league.members[", k, "].policy_file: \"", m.policy_file(),
                     "\" (member ", m.name(), ") does not load as TorchScript"),
        [&] {
          member.module = torch::jit::load(m.policy_file(), torch::kCPU);
          member.module.eval();
        },
        absl::StatusCode::kInvalidArgument));
    // Its inputs, self apart: (obs) or (obs, mask), read by name. A
    // recurrent export's forward(obs[, mask], state) needs a state carried
    // from step to step per row, which a member does not keep: refused here
    // rather than its state read as a mask.
    const std::optional<torch::jit::Method> forward =
        member.module.find_method("forward");
    if (!forward.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "league.members[", k, "].policy_file: \"", m.policy_file(),
          "\" (member ", m.name(), ") has no forward method"));
    }
    const auto& arguments = forward->function().getSchema().arguments();
    std::vector<std::string> names;
    for (size_t a = 1; a < arguments.size(); ++a) {
      names.push_back(arguments[a].name());
    }
    const bool recurrent =
        (member.module.hasattr("state_size") &&
         member.module.attr("state_size").isInt() &&
         member.module.attr("state_size").toInt() > 0) ||
        std::find(names.begin(), names.end(), "state") != names.end();
    if (recurrent) {
      return absl::InvalidArgumentError(absl::StrCat(
          "league.members[", k, "].policy_file: \"", m.policy_file(),
          "\" (member ", m.name(), ") is a recurrent policy (forward(",
          absl::StrJoin(names, ", "),
          ")); a member must act from the observation alone: "
          "forward(obs) or forward(obs, mask)"));
    }
    if (names.empty() || names.size() > 2 ||
        (names.size() == 2 && names[1] != "mask")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "league.members[", k, "].policy_file: \"", m.policy_file(),
          "\" (member ", m.name(), ") has forward(", absl::StrJoin(names, ", "),
          "); a member's is forward(obs) or forward(obs, mask)"));
    }
    member.takes_mask = names.size() == 2;
    league->members_.push_back(std::move(member));
  }
  ASSIGN_OR_RETURN(ActorCritic first, league->Freeze(policy));
  const int64_t version = updates / league->spec_.league().snapshot_interval();
  league->frozen_.emplace(version, first);
  league->pool_.push_back(OpponentRecord{version, 0, 0});
  std::fill(league->opponent_of_copy_.begin(), league->opponent_of_copy_.end(),
            version);
  league->next_version_ = version + 1;
  return league;
}

absl::StatusOr<ActorCritic> League::Freeze(ActorCritic& policy) const {
  ASSIGN_OR_RETURN(ActorCritic frozen,
                   CreateSeededActorCritic(RunNetworkConfig(spec_), 0));
  RETURN_IF_ERROR(CatchTorchErrors("freezing a league version",
                                   [&] { frozen->to(policy->device()); }));
  RETURN_IF_ERROR(CopyPolicyWeights(policy, frozen));
  return frozen;
}

int64_t League::DrawOpponent() {
  if (!members_.empty()) {
    // Member k with its share of the games, the pool with the rest.
    double x = std::uniform_real_distribution<double>(0, 1)(draws_);
    for (int k = 0; k < spec_.league().members_size(); ++k) {
      x -= spec_.league().members(k).share();
      if (x < 0) return -(k + 1);
    }
  }
  const std::vector<OpponentRecord> pool(pool_.begin(), pool_.end());
  const std::vector<double> w =
      OpponentWeights(spec_.league().sampling(), pool);
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  return pool[pick(draws_)].version;
}

OpponentRecord* League::Find(int64_t version) {
  if (version < 0) {
    const size_t k = static_cast<size_t>(-version - 1);
    return k < members_.size() ? &members_[k].record : nullptr;
  }
  for (OpponentRecord& r : pool_) {
    if (r.version == version) return &r;
  }
  return nullptr;
}

void League::Prune() {
  for (auto it = frozen_.begin(); it != frozen_.end();) {
    const int64_t v = it->first;
    const bool playing =
        std::find(opponent_of_copy_.begin(), opponent_of_copy_.end(), v) !=
        opponent_of_copy_.end();
    if (!playing && Find(v) == nullptr) {
      fused_.erase(v);
      it = frozen_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::Status League::Act(const torch::Tensor& observations,
                         const torch::Tensor& masks, torch::Tensor actions) {
  if (rows_stale_) {
    std::map<int64_t, std::vector<int64_t>> rows;
    for (int64_t c = 0; c < copies_; ++c) {
      std::vector<int64_t>& r = rows[opponent_of_copy_[c]];
      for (int k = 0; k < agents_; ++k) {
        if (k != c % agents_) r.push_back(c * agents_ + k);
      }
    }
    rows_of_version_.clear();
    for (auto& [version, r] : rows) {
      rows_of_version_[version] = torch::tensor(r, torch::kInt64);
    }
    rows_stale_ = false;
  }
  // The fused kernels read contiguous float observations and know no
  // masks (as for the trained policy, actor/rollout_collector.cc).
  const bool fusable = !masks.defined() &&
                       observations.scalar_type() == torch::kFloat32 &&
                       observations.is_contiguous() && actions.is_contiguous();
  return CatchTorchErrors("league: a frozen opponent's step", [&] {
    for (const auto& [version, rows] : rows_of_version_) {
      if (version < 0) {
        RETURN_IF_ERROR(MemberAct(version, observations, masks, rows, actions));
        continue;
      }
      ActorCritic& opponent = frozen_.at(version);
      if (fusable) {
        auto it = fused_.find(version);
        if (it == fused_.end()) {
          // Kept only once decided: after a failure here it is tried again.
          std::unique_ptr<FusedRows> made;
          ASSIGN_OR_RETURN(
              const bool use,
              UseFusedPolicy(spec_.execution().cpu_kernels(), opponent));
          if (use) {
            made = std::make_unique<FusedRows>();
            RETURN_IF_ERROR(made->Bind(opponent));
          }
          it = fused_.emplace(version, std::move(made)).first;
        }
        if (it->second != nullptr) {
          it->second->Act(observations, rows,
                          actions_.get<at::CPUGeneratorImpl>(), actions);
          continue;
        }
      }
      const PolicyStep step = opponent->Act(
          observations.index_select(0, rows), actions_, false,
          masks.defined() ? masks.index_select(0, rows) : torch::Tensor());
      actions.index_copy_(0, rows,
                          step.actions.to(actions.device(), actions.dtype()));
    }
    return absl::OkStatus();
  });
}

absl::Status League::MemberAct(int64_t version,
                               const torch::Tensor& observations,
                               const torch::Tensor& masks,
                               const torch::Tensor& rows,
                               torch::Tensor& actions) {
  const int k = static_cast<int>(-version - 1);
  Member& member = members_.at(k);
  const std::string who =
      absl::StrCat("league member ", spec_.league().members(k).name(), " (",
                   spec_.league().members(k).policy_file(), ")");
  std::vector<torch::jit::IValue> inputs;
  torch::Tensor obs = observations.index_select(0, rows);
  if (obs.device() != torch::kCPU) obs = obs.to(torch::kCPU);
  inputs.emplace_back(obs);
  if (member.takes_mask) {
    if (!masks.defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": its forward takes a mask, and this environment has none"));
    }
    inputs.emplace_back(masks.index_select(0, rows).to(torch::kCPU));
  }
  RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat(who, ": forward"),
      [&]() -> absl::Status {
        const torch::jit::IValue out = member.module.forward(inputs);
        torch::Tensor chosen;
        if (out.isTensor()) {
          chosen = out.toTensor();
        } else if (out.isTuple() && !out.toTupleRef().elements().empty() &&
                   out.toTupleRef().elements()[0].isTensor()) {
          chosen = out.toTupleRef().elements()[0].toTensor();
        } else {
          return absl::InvalidArgumentError(
              absl::StrCat(who,
                           ": forward returned neither the actions nor a tuple "
                           "that begins with them"));
        }
        std::vector<int64_t> want = actions.sizes().vec();
        want[0] = rows.numel();
        if (chosen.sizes().vec() != want) {
          return absl::InvalidArgumentError(absl::StrCat(
              who, ": forward returned actions ", DescribeTensor(chosen),
              " for ", rows.numel(), " rows; expected the shape [",
              absl::StrJoin(want, ", "), "]"));
        }
        actions.index_copy_(0, rows,
                            chosen.to(actions.device(), actions.dtype()));
        return absl::OkStatus();
      },
      absl::StatusCode::kInvalidArgument));
  return absl::OkStatus();
}

std::vector<OpponentRecord> League::member_records() const {
  std::vector<OpponentRecord> out;
  for (const Member& m : members_) out.push_back(m.record);
  return out;
}

void League::StepEnded(const uint8_t* terminated, const uint8_t* truncated,
                       const float* episode_returns,
                       const int32_t* episode_lengths, const uint8_t* alive) {
  bool drew = false;
  for (int64_t c = 0; c < copies_; ++c) {
    const int64_t row = c * agents_ + c % agents_;
    if (terminated[row] | truncated[row]) {
      // The trained seat's episode is the match, recorded with it (the
      // learner pairs a segment's matches with its trained episodes).
      const float ret = episode_returns[row];
      matches_.push_back(
          LeagueMatch{env_steps_, next_version_, opponent_of_copy_[c], ret});
      if (OpponentRecord* record = Find(opponent_of_copy_[c])) {
        record->learner_score += Score(ret);
        record->games += 1;
      }
      learner_returns_.push_back(ret);
      learner_lengths_.push_back(episode_lengths[row]);
      recent_.push_back(ret);
      if (recent_.size() > kRecentGames) recent_.pop_front();
      waiting_[c] = 1;
    }
    if (!waiting_[c]) continue;  // the trained seat plays on
    if (alive != nullptr) {
      // The game is over once its last agent has left: the copy then
      // starts a new one, every agent alive again. Until then the same
      // opponent plays on.
      const int64_t first = c * agents_;
      bool ended = false, all_alive = true;
      for (int64_t r = first; r < first + agents_; ++r) {
        ended |= (terminated[r] | truncated[r]) != 0;
        all_alive &= alive[r] != 0;
      }
      if (!(ended && all_alive)) continue;
    }
    waiting_[c] = 0;
    opponent_of_copy_[c] = DrawOpponent();
    drew = true;
  }
  if (drew) {
    rows_stale_ = true;
    Prune();
  }
}

absl::Status League::AfterUpdate(int64_t updates, int64_t env_steps,
                                 ActorCritic& policy) {
  env_steps_ = env_steps;
  // Version k is the policy once it has made k * snapshot_interval
  // updates: in rl_local, which sees every update, exactly; in an actor,
  // which sees the versions the learner published when it looked, the
  // first one at or after that. Versions it skipped are not in its pool.
  const int64_t due = updates / spec_.league().snapshot_interval();
  if (due < next_version_) return absl::OkStatus();
  ASSIGN_OR_RETURN(ActorCritic frozen, Freeze(policy));
  frozen_.emplace(due, frozen);
  pool_.push_back(OpponentRecord{due, 0, 0});
  next_version_ = due + 1;
  while (static_cast<int64_t>(pool_.size()) > spec_.league().pool_size()) {
    pool_.pop_front();
  }
  Prune();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> League::AdoptEarlier(
    const std::vector<std::pair<int64_t, ActorCritic>>& versions) {
  int64_t adopted = 0;
  // Newest first onto the front of the pool, each older than its front.
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    auto [version, net] = *it;
    if (version < 0 || version >= pool_.front().version) continue;
    ASSIGN_OR_RETURN(ActorCritic frozen, Freeze(net));
    frozen_.emplace(version, frozen);
    pool_.push_front(OpponentRecord{version, 0, 0});
    ++adopted;
  }
  while (static_cast<int64_t>(pool_.size()) > spec_.league().pool_size()) {
    pool_.pop_front();
  }
  Prune();
  return adopted;
}

std::vector<float> League::TakeLearnerReturns() {
  return std::exchange(learner_returns_, {});
}

std::vector<int32_t> League::TakeLearnerLengths() {
  return std::exchange(learner_lengths_, {});
}

std::vector<LeagueMatch> League::TakeMatches() {
  return std::exchange(matches_, {});
}

std::string League::Describe() const {
  std::string out = absl::StrFormat("pool v%d-v%d (%d versions, %s)",
                                    pool_.front().version, pool_.back().version,
                                    pool_.size(), spec_.league().sampling());
  for (size_t k = 0; k < members_.size(); ++k) {
    const OpponentRecord& r = members_[k].record;
    absl::StrAppendFormat(&out, ", member %s",
                          spec_.league().members(k).name());
    if (r.games > 0) {
      absl::StrAppendFormat(&out, " (scored %.0f%% of %d games)",
                            100 * r.learner_score / r.games, r.games);
    }
  }
  if (recent_.empty()) return out;
  double won = 0, drew = 0;
  for (const float r : recent_) {
    won += r > 0;
    drew += r == 0;
  }
  const double n = recent_.size() / 100.0;
  return absl::StrFormat(
      "%s; the last %d games: won %.0f%%, drew %.0f%%, lost %.0f%%", out,
      recent_.size(), won / n, drew / n, (recent_.size() - won - drew) / n);
}

}  // namespace rl
