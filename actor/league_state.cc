// League's checkpoint: SaveState and RestoreState (actor/league.h), the
// pool's weights and records, each copy's opponent and the draws' streams
// under "league." keys.
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actor/league.h"
#include "common/status.h"
#include "policy/tensor_bytes.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

// A network's tensors in a fixed order: its parameters, then its buffers.
std::vector<torch::Tensor> Weights(ActorCritic& policy) {
  std::vector<torch::Tensor> out = policy->parameters();
  for (const torch::Tensor& b : policy->buffers()) out.push_back(b);
  return out;
}

}  // namespace

void League::SaveState(std::map<std::string, torch::Tensor>* state) const {
  std::vector<int64_t> versions, games, frozen;
  std::vector<double> scores;
  for (const OpponentRecord& r : pool_) {
    versions.push_back(r.version);
    scores.push_back(r.learner_score);
    games.push_back(r.games);
  }
  (*state)["league.pool_versions"] = torch::tensor(versions, torch::kInt64);
  (*state)["league.pool_scores"] = torch::tensor(scores, torch::kFloat64);
  (*state)["league.pool_games"] = torch::tensor(games, torch::kInt64);
  for (const auto& [version, policy] : frozen_) {
    frozen.push_back(version);
    ActorCritic p = policy;
    const std::vector<torch::Tensor> w = Weights(p);
    for (size_t i = 0; i < w.size(); ++i) {
      (*state)[absl::StrCat("league.v", version, ".", i)] =
          w[i].detach().to(torch::kCPU).clone();
    }
  }
  (*state)["league.frozen"] = torch::tensor(frozen, torch::kInt64);
  if (!members_.empty()) {
    std::vector<double> member_scores;
    std::vector<int64_t> member_games;
    for (const Member& m : members_) {
      member_scores.push_back(m.record.learner_score);
      member_games.push_back(m.record.games);
    }
    (*state)["league.member_scores"] =
        torch::tensor(member_scores, torch::kFloat64);
    (*state)["league.member_games"] =
        torch::tensor(member_games, torch::kInt64);
  }
  (*state)["league.opponents"] =
      torch::tensor(opponent_of_copy_, torch::kInt64);
  // The copies whose trained seat left a game still played
  // (env.agents_leave): their next opponent is drawn when it ends.
  (*state)["league.waiting"] = torch::tensor(waiting_, torch::kUInt8);
  (*state)["league.counters"] =
      torch::tensor(std::vector<int64_t>{next_version_, env_steps_});
  (*state)["league.recent"] =
      torch::tensor(std::vector<float>(recent_.begin(), recent_.end()));
  std::ostringstream draws;
  draws << draws_;
  (*state)["league.draws"] = BytesTensor(draws.str());
  torch::Generator g = actions_;
  (*state)["league.actions_generator"] = BytesTensor(GeneratorStateBytes(g));
}

absl::Status League::RestoreState(
    const std::map<std::string, torch::Tensor>& state) {
  const auto get = [&](const std::string& key,
                       torch::Dtype dtype) -> absl::StatusOr<torch::Tensor> {
    auto it = state.find(key);
    if (it == state.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint has no ", key,
                       " (written by a run without this league block?)"));
    }
    if (it->second.scalar_type() != dtype || it->second.dim() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint's ", key, " is not a 1-d ",
                       c10::toString(dtype), " tensor"));
    }
    return it->second.to(torch::kCPU).contiguous();
  };
  ASSIGN_OR_RETURN(const torch::Tensor versions,
                   get("league.pool_versions", torch::kInt64));
  ASSIGN_OR_RETURN(const torch::Tensor scores,
                   get("league.pool_scores", torch::kFloat64));
  ASSIGN_OR_RETURN(const torch::Tensor games,
                   get("league.pool_games", torch::kInt64));
  ASSIGN_OR_RETURN(const torch::Tensor frozen,
                   get("league.frozen", torch::kInt64));
  ASSIGN_OR_RETURN(const torch::Tensor opponents,
                   get("league.opponents", torch::kInt64));
  ASSIGN_OR_RETURN(const torch::Tensor counters,
                   get("league.counters", torch::kInt64));
  ASSIGN_OR_RETURN(const torch::Tensor recent,
                   get("league.recent", torch::kFloat32));
  ASSIGN_OR_RETURN(const torch::Tensor draws,
                   get("league.draws", torch::kUInt8));
  ASSIGN_OR_RETURN(const torch::Tensor generator,
                   get("league.actions_generator", torch::kUInt8));
  if (versions.numel() == 0 || scores.numel() != versions.numel() ||
      games.numel() != versions.numel() || counters.numel() != 2) {
    return absl::InvalidArgumentError(
        "checkpoint's league: an empty pool, or its records and counters "
        "do not match it");
  }
  if (opponents.numel() != copies_) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint's league plays ", opponents.numel(),
                     " environment copies, this run ", copies_));
  }
  // Everything into locals first: a failed restore leaves the league as
  // it was.
  const int64_t* v = versions.data_ptr<int64_t>();
  const int64_t* f = frozen.data_ptr<int64_t>();
  std::map<int64_t, ActorCritic> restored;
  ActorCritic any = frozen_.begin()->second;
  for (int64_t i = 0; i < frozen.numel(); ++i) {
    ASSIGN_OR_RETURN(ActorCritic p, Freeze(any));
    std::vector<torch::Tensor> w = Weights(p);
    for (size_t k = 0; k < w.size(); ++k) {
      const std::string key = absl::StrCat("league.v", f[i], ".", k);
      auto it = state.find(key);
      if (it == state.end() || !it->second.sizes().equals(w[k].sizes()) ||
          it->second.scalar_type() != w[k].scalar_type()) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint's league version ", f[i],
                         " does not fit this run's policy (", key, ")"));
      }
      RETURN_IF_ERROR(CatchTorchErrors("restoring a league version", [&] {
        torch::NoGradGuard no_grad;
        w[k].copy_(it->second);
      }));
    }
    restored.emplace(f[i], p);
  }
  std::deque<OpponentRecord> pool;
  for (int64_t i = 0; i < versions.numel(); ++i) {
    if (restored.count(v[i]) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint's league: pool version ", v[i], " has no weights"));
    }
    pool.push_back(OpponentRecord{v[i], scores.data_ptr<double>()[i],
                                  games.data_ptr<int64_t>()[i]});
  }
  // The members' records: none kept (a checkpoint of the run before it
  // had members) counts from 0.
  std::vector<OpponentRecord> kept = member_records();
  for (OpponentRecord& r : kept) r.learner_score = r.games = 0;
  if (state.count("league.member_scores") > 0) {
    ASSIGN_OR_RETURN(const torch::Tensor member_scores,
                     get("league.member_scores", torch::kFloat64));
    ASSIGN_OR_RETURN(const torch::Tensor member_games,
                     get("league.member_games", torch::kInt64));
    if (member_scores.numel() != static_cast<int64_t>(members_.size()) ||
        member_games.numel() != member_scores.numel()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint's league has ", member_scores.numel(),
          " members, this run's ", members_.size(), " (league.members)"));
    }
    for (size_t k = 0; k < members_.size(); ++k) {
      kept[k].learner_score = member_scores.data_ptr<double>()[k];
      kept[k].games = member_games.data_ptr<int64_t>()[k];
    }
  }
  std::vector<int64_t> playing(opponents.data_ptr<int64_t>(),
                               opponents.data_ptr<int64_t>() + copies_);
  // The copies waiting for their games' ends: none kept (a checkpoint
  // from before agents could leave in a league) is none.
  std::vector<uint8_t> waiting(copies_, 0);
  if (state.count("league.waiting") > 0) {
    ASSIGN_OR_RETURN(const torch::Tensor kept,
                     get("league.waiting", torch::kUInt8));
    if (kept.numel() != copies_) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint's league.waiting holds ", kept.numel(),
                       " copies, this run ", copies_));
    }
    waiting.assign(kept.data_ptr<uint8_t>(),
                   kept.data_ptr<uint8_t>() + copies_);
  }
  for (int64_t c = 0; c < copies_; ++c) {
    if (playing[c] < 0) {
      if (-playing[c] > static_cast<int64_t>(members_.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint's league: copy ", c, " plays member ", -playing[c],
            ", and this run has ", members_.size(), " (league.members)"));
      }
      continue;
    }
    if (restored.count(playing[c]) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint's league: copy ", c, " plays version ",
                       playing[c], ", which it does not hold"));
    }
  }
  std::mt19937_64 restored_draws;
  std::istringstream in(TensorBytes(draws));
  in >> restored_draws;
  if (in.fail()) {
    return absl::InvalidArgumentError(
        "checkpoint's league.draws is not a random stream's state");
  }
  torch::Generator g = actions_.clone();
  RETURN_IF_ERROR(
      SetGeneratorState(TensorBytes(generator), g, "checkpoint's league"));

  frozen_ = std::move(restored);
  fused_.clear();  // bound to the versions replaced
  pool_ = std::move(pool);
  for (size_t k = 0; k < members_.size(); ++k) {
    members_[k].record = kept[k];
  }
  opponent_of_copy_ = std::move(playing);
  waiting_ = std::move(waiting);
  next_version_ = counters.data_ptr<int64_t>()[0];
  env_steps_ = counters.data_ptr<int64_t>()[1];
  recent_.assign(recent.data_ptr<float>(),
                 recent.data_ptr<float>() + recent.numel());
  draws_ = restored_draws;
  actions_ = g;
  rows_stale_ = true;
  return absl::OkStatus();
}

}  // namespace rl
