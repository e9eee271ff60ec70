// Population-based training's rounds on the coordinator (method pbt): the
// part of SweepManager (coordinator/sweep_manager.h) that follows a round's
// runs, plans the next round when all ended (runspec/pbt.h decides) and
// submits each member's run of it.
#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/sweep_manager.h"
#include "coordinator/sweep_trial_state.h"
#include "runspec/pbt.h"

namespace rl {
namespace {

// Each round's run of a member starts its environments from other seeds
// than the rounds before (the learner's own streams come with the
// checkpoint).
constexpr uint64_t kPbtRoundSeedStride = 7919;

}  // namespace

bool SweepManager::AdvancePbtLocked(Live* live) {
  Sweep& sweep = live->sweep;
  const SweepSpec& spec = sweep.spec();
  const int round = sweep.pbt_round();
  const int64_t target = PbtRoundSteps(spec, round);
  const int64_t budget = spec.base().total_env_steps();
  int unfinished = 0;
  for (Trial& trial : *sweep.mutable_trials()) {
    if (!RunsThisRound(sweep, trial) || IsFinal(trial.state()) ||
        WaitsForTheRound(sweep, trial)) {
      continue;
    }
    if (FollowRoundLocked(live, &trial)) ++unfinished;
  }
  for (Trial& trial : *sweep.mutable_trials()) {
    if (unfinished >= spec.concurrency()) break;
    if (RunsThisRound(sweep, trial) || IsFinal(trial.state())) continue;
    SubmitRoundLocked(live, &trial, target < budget ? target : 0);
    if (!RunsThisRound(sweep, trial)) {
      if (!IsFinal(trial.state())) break;  // the owner's queue: later
      continue;
    }
    // A run given back by its idempotency key (a restart between its
    // submit and the sweep's write) may have ended already.
    if (FollowRoundLocked(live, &trial)) ++unfinished;
  }
  const bool round_ended = std::all_of(
      sweep.trials().begin(), sweep.trials().end(), [&](const Trial& t) {
        return IsFinal(t.state()) || WaitsForTheRound(sweep, t);
      });
  if (round_ended) {
    if (target < budget && PlanRoundLocked(live, target)) {
      return AdvancePbtLocked(live);  // the next round's first runs
    }
    FinishLocked(live);
  }
  WriteLocked(live);
  return round_ended;
}

bool SweepManager::FollowRoundLocked(Live* live, Trial* trial) {
  Run run;
  FollowTrialLocked(live, trial, &run);
  if (trial->state() != SUCCEEDED) return !IsFinal(trial->state());
  // Its run stopped at the round's end (Run.stop_env_steps; the last
  // round's has none), not at the base's target_return, which ends the
  // member: it goes on with the next round. Decided from the run itself,
  // not from a progress report that may not have been stored.
  if (run.stop_env_steps() <= 0 ||
      run.progress().target_reached_at_steps() > 0) {
    return false;
  }
  const int round = live->sweep.pbt_round();
  trial->set_rounds_done(round + 1);
  trial->set_state(QUEUED);
  trial->set_reason(absl::StrCat("round ", round + 1, " ended at ",
                                 trial->env_steps(),
                                 " env steps; waits for the others"));
  return false;
}

bool SweepManager::PlanRoundLocked(Live* live, int64_t target) {
  Sweep& sweep = live->sweep;
  const SweepSpec& spec = sweep.spec();
  const int round = sweep.pbt_round();
  const bool maximize = spec.metric().goal() != "min";
  // Members that go on: their run of this round reached its end. One that
  // failed, was cancelled or ended early at the run's target_return is
  // done.
  // A member's score (FollowTrialLocked's) counts only this round's points.
  std::vector<PbtMember> members;
  for (const Trial& trial : sweep.trials()) {
    if (!WaitsForTheRound(sweep, trial)) continue;
    PbtMember m;
    m.trial = trial.index();
    m.score = trial.score();
    m.parameters.insert(trial.parameters().begin(), trial.parameters().end());
    members.push_back(std::move(m));
  }
  if (members.empty()) return false;
  // Deterministic per round: a coordinator restarted before this round's
  // plan was written plans the same one.
  std::mt19937_64 rng((spec.seed() ^ 0x9e3779b97f4a7c15ULL) +
                      static_cast<uint64_t>(round));
  const std::vector<PbtCopy> copies =
      PlanPbtRound(spec, maximize, members, &rng);
  std::map<int, const PbtCopy*> copy_of;
  for (const PbtCopy& copy : copies) copy_of[copy.trial] = &copy;
  // The donors' state as this round left it (a donor may itself copy).
  const std::vector<Trial> ended(sweep.trials().begin(), sweep.trials().end());
  for (const PbtMember& m : members) {
    Trial& trial = *sweep.mutable_trials(m.trial);
    trial.set_start_from_run(trial.run_id());
    trial.set_round_start_env_steps(trial.env_steps());
    auto it = copy_of.find(m.trial);
    if (it != copy_of.end()) {
      const PbtCopy& copy = *it->second;
      const Trial& donor = ended[copy.donor];
      absl::StatusOr<SweepTrial> next =
          MakeSweepTrial(spec, copy.parameters, trial.index(), trial.config(),
                         trial.seed_offset());
      if (!next.ok()) {
        // Its own weights and parameters go on.
        RL_LOG_WARNING("sweep {}: trial {} could not copy trial {}: {}",
                       sweep.sweep_id(), trial.index(), copy.donor,
                       next.status().ToString());
      } else {
        live->expanded[trial.index()] = *next;
        trial.clear_parameters();
        for (const auto& [path, value] : next->parameters) {
          (*trial.mutable_parameters())[path] = value;
        }
        trial.set_start_from_run(donor.run_id());
        trial.set_round_start_env_steps(donor.env_steps());
        *trial.mutable_lineage() = donor.lineage();
        trial.add_lineage(absl::StrCat("trial ", trial.index(), " at ",
                                       donor.env_steps(),
                                       " env steps: ", copy.description));
        // Its return window is the donor's now.
        trial.set_score(donor.score());
        *trial.mutable_recent() = donor.recent();
        *trial.mutable_recent_steps() = donor.recent_steps();
        RL_LOG_INFO("sweep {}: {}", sweep.sweep_id(),
                    trial.lineage().rbegin()[0]);
      }
    }
    trial.set_state(QUEUED);
    trial.clear_reason();
  }
  sweep.set_pbt_round(round + 1);
  RL_LOG_INFO(
      "sweep {}: round {} ended at {} env steps ({} members go on, "
      "{} copied); round {} to {}",
      sweep.sweep_id(), round + 1, target, members.size(), copies.size(),
      round + 2, PbtRoundSteps(spec, round + 1));
  return true;
}

void SweepManager::SubmitRoundLocked(Live* live, Trial* trial,
                                     int64_t stop_env_steps) {
  const int round = live->sweep.pbt_round();
  SweepTrial& expanded = live->expanded[trial->index()];
  SubmitRunRequest request;
  *request.mutable_spec() = expanded.spec;
  request.mutable_spec()->set_seed(expanded.spec.seed() +
                                   kPbtRoundSeedStride *
                                       static_cast<uint64_t>(round));
  request.set_idempotency_key(absl::StrCat(live->sweep.sweep_id(), "/",
                                           trial->index(), "/round-", round));
  RunRound run_round;
  run_round.start_from_run = trial->start_from_run();
  run_round.stop_env_steps = stop_env_steps;
  absl::StatusOr<SubmitRunResponse> submitted =
      core_->SubmitRun(request, live->sweep.owner(), run_round);
  if (submitted.status().code() == absl::StatusCode::kResourceExhausted) {
    return;  // the owner's queue is full (or the store): next tick
  }
  if (!submitted.ok()) {
    trial->set_state(FAILED);
    trial->set_reason(absl::StrCat("submit of round ", round + 1, ": ",
                                   submitted.status().message()));
    return;
  }
  trial->set_run_id(submitted->run().run_id());
  trial->add_round_run_ids(submitted->run().run_id());
  trial->set_state(submitted->run().state());
  RL_LOG_INFO("sweep {}: trial {} round {} is {} ({}{})",
              live->sweep.sweep_id(), trial->index(), round + 1,
              trial->run_id(), DescribeParameters(expanded.parameters),
              trial->start_from_run().empty()
                  ? std::string()
                  : absl::StrCat("; from ", trial->start_from_run()));
}

}  // namespace rl
