#include "coordinator/sweep_manager.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/sweep_trial_state.h"
#include "runspec/run_spec.h"

namespace rl {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void SetNow(google::protobuf::Timestamp* ts) {
  const int64_t ns = absl::ToUnixNanos(absl::Now());
  ts->set_seconds(ns / 1000000000);
  ts->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

RunFileFormat FormatOf(absl::string_view name) {
  return absl::EndsWith(name, ".json") ? RunFileFormat::kJson
                                       : RunFileFormat::kYaml;
}

bool Better(double a, double b, bool maximize) {
  if (std::isnan(b)) return !std::isnan(a);
  if (std::isnan(a)) return false;
  return maximize ? a > b : a < b;
}

// Configurations a sweep holds (each one seeds_per_config trials).
int ConfigurationsOf(const Sweep& sweep) {
  const int n = sweep.trials_size();
  return n == 0 ? 0 : sweep.trials(n - 1).config() + 1;
}

std::string Number(double v) {
  return std::isnan(v) ? "none" : absl::StrFormat("%.4g", v);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SweepManager>> SweepManager::Create(
    CoordinatorCore* core, RunStore* store, int max_unfinished_per_owner) {
  auto manager = std::unique_ptr<SweepManager>(
      new SweepManager(core, store, max_unfinished_per_owner));
  RETURN_IF_ERROR(manager->Recover());
  return manager;
}

bool SweepManager::CancelTrialRun(const Sweep& sweep, Trial* trial,
                                  const std::string& reason) {
  absl::StatusOr<Run> run = core_->CancelRun(trial->run_id(), reason);
  if (!run.ok()) {
    RL_LOG_WARNING("sweep {}: cancelling {}: {}", sweep.sweep_id(),
                   trial->run_id(), run.status().ToString());
    return false;
  }
  trial->set_state(run->state());
  trial->set_reason(run->failure_reason());
  return true;
}

void SweepManager::AppendTrial(Live* live, const SweepTrial& expanded) {
  Trial* trial = live->sweep.add_trials();
  trial->set_index(expanded.index);
  trial->set_config(expanded.config);
  trial->set_seed_offset(expanded.seed_offset);
  for (const auto& [path, value] : expanded.parameters) {
    (*trial->mutable_parameters())[path] = value;
  }
  trial->set_state(QUEUED);
  trial->set_score(kNaN);
  live->expanded.push_back(expanded);
}

absl::StatusOr<Sweep> SweepManager::AddTrial(
    const AddSweepTrialRequest& request, const Requester& by) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(request.sweep_id());
  if (it == live_.end()) {
    ASSIGN_OR_RETURN(const Sweep ended, store_->GetSweep(request.sweep_id()));
    RETURN_IF_ERROR(CheckOwnerOrAdmin(absl::StrCat("sweep ", ended.sweep_id()),
                                      ended.owner(), by));
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", ended.sweep_id(), " has ended (",
                     RunState_Name(ended.state()), ")"));
  }
  Live& live = it->second;
  RETURN_IF_ERROR(CheckOwnerOrAdmin(absl::StrCat("sweep ", request.sweep_id()),
                                    live.sweep.owner(), by));
  const SweepSpec& spec = live.sweep.spec();
  if (spec.method() != "external") {
    return absl::FailedPreconditionError(absl::StrCat(
        "sweep ", request.sweep_id(), " draws its own trials (method ",
        spec.method(), "); only a sweep of method external takes them"));
  }
  const int configs = ConfigurationsOf(live.sweep);
  if (configs >= spec.max_trials()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", request.sweep_id(), " has its max_trials (",
                     spec.max_trials(), ") configurations already"));
  }
  // Under the field names the sweep keeps (a driver may write the file's
  // lowerCamelCase ones).
  std::map<std::string, google::protobuf::Value> parameters;
  for (const auto& [path, value] : request.parameters()) {
    parameters[RunFieldName(path)] = value;
  }
  RETURN_IF_ERROR(CheckConfiguration(spec, parameters));
  std::vector<SweepTrial> made;
  for (int s = 0; s < spec.seeds_per_config(); ++s) {
    ASSIGN_OR_RETURN(
        SweepTrial trial,
        MakeSweepTrial(spec, parameters,
                       live.sweep.trials_size() + static_cast<int>(made.size()),
                       configs, s));
    made.push_back(std::move(trial));
  }
  for (const SweepTrial& trial : made) AppendTrial(&live, trial);
  // Stored before their runs are submitted. Otherwise a restart between
  // the two lost the configuration, and the next one added took its index,
  // whose idempotency key (<sweep>/<index>) then returned the lost one's
  // run, of other parameters.
  if (absl::Status stored = StoreLocked(&live); !stored.ok()) {
    const int keep = live.sweep.trials_size() - static_cast<int>(made.size());
    live.sweep.mutable_trials()->DeleteSubrange(keep, made.size());
    live.expanded.erase(live.expanded.end() - made.size(), live.expanded.end());
    live.sweep.set_trials_total(live.sweep.trials_size());
    return absl::Status(stored.code(),
                        absl::StrCat("sweep ", request.sweep_id(),
                                     ": the configuration was not stored "
                                     "(nothing of it kept; add it again): ",
                                     stored.message()));
  }
  return AdvanceOneLocked(request.sweep_id());
}

absl::StatusOr<Sweep> SweepManager::Submit(const SubmitSweepRequest& request,
                                           const std::string& owner) {
  const std::string name = request.sweep_file_name().empty()
                               ? std::string("sweep file")
                               : request.sweep_file_name();
  if (request.sweep_file_name().size() > 4096) {
    return absl::InvalidArgumentError("sweep_file_name: at most 4096 bytes");
  }
  if (request.idempotency_key().size() > 256) {
    return absl::InvalidArgumentError("idempotency_key: at most 256 bytes");
  }
  for (const auto& [field, bytes] :
       {std::pair<const char*, const std::string*>{"sweep_file",
                                                   &request.sweep_file()},
        {"base_run_file", &request.base_run_file()}}) {
    if (bytes->size() > static_cast<size_t>(kMaxRunFileBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", bytes->size(), " bytes, at most ", kMaxRunFileBytes));
    }
  }
  if (request.sweep_file().empty()) {
    return absl::InvalidArgumentError("sweep_file: empty");
  }
  // The base run file comes with the request: the coordinator does not
  // read the caller's disk.
  const BaseRunLoader load_base =
      [&](const std::string& path) -> absl::StatusOr<RunSpec> {
    if (request.base_run_file().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the sweep names \"", path,
                       "\": send that file's text with it (SubmitSweepRequest."
                       "base_run_file; rlctl sweep submit does)"));
    }
    return LoadRunSpec(request.base_run_file(), FormatOf(path));
  };
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpec(request.sweep_file(), FormatOf(name), load_base);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(),
                        absl::StrCat(name, ": ", spec.status().message()));
  }
  if (spec->method() == "pbt" &&
      (spec->base().total_env_steps() + spec->pbt().interval_steps() - 1) /
              std::max<int64_t>(1, spec->pbt().interval_steps()) >
          kMaxPbtRounds) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": pbt.interval_steps: ", spec->pbt().interval_steps(),
        " makes more than ", kMaxPbtRounds, " rounds of the budget (",
        spec->base().total_env_steps(),
        " env steps); the coordinator keeps every round's run and copy with "
        "the sweep"));
  }
  if (spec->metric().series() != kSweepSeries) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": metric.series: the coordinator scores ", kSweepSeries,
        " (its trials' mean return of the last 100 episodes), not \"",
        spec->metric().series(), "\""));
  }
  // A submit again with a used key gets its sweep, limit or not.
  if (!request.idempotency_key().empty()) {
    absl::StatusOr<Sweep> made =
        store_->FindSweepByKey(request.idempotency_key(), owner);
    if (made.ok()) return Get(made->sweep_id());
    if (!absl::IsNotFound(made.status())) return made.status();
  }
  {
    absl::MutexLock lock(&mu_);
    int running = submitting_[owner];
    for (const auto& [id, live] : live_) running += live.sweep.owner() == owner;
    if (max_unfinished_per_owner_ > 0 && running >= max_unfinished_per_owner_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          owner, " has ", running, " sweeps running, at most ",
          max_unfinished_per_owner_,
          " (--max_sweeps_per_user): cancel one or wait for one to end"));
    }
    ++submitting_[owner];
  }
  // Counted until it is in live_ (or failed); runs after the lock below.
  absl::Cleanup submitted = [this, &owner] {
    absl::MutexLock lock(&mu_);
    if (--submitting_[owner] == 0) submitting_.erase(owner);
  };
  absl::StatusOr<std::vector<SweepTrial>> expanded = ExpandSweep(*spec);
  if (!expanded.ok()) {
    return absl::Status(expanded.status().code(),
                        absl::StrCat(name, ": ", expanded.status().message()));
  }
  Sweep sweep;
  *sweep.mutable_spec() = *spec;
  sweep.set_state(RUNNING);
  sweep.set_owner(owner);
  SetNow(sweep.mutable_create_time());
  SetNow(sweep.mutable_update_time());
  Live made;
  made.sweep = std::move(sweep);
  for (const SweepTrial& t : *expanded) AppendTrial(&made, t);
  sweep = std::move(made.sweep);
  bool created = false;
  ASSIGN_OR_RETURN(
      sweep, store_->CreateSweep(std::move(sweep), request.idempotency_key(),
                                 &created));
  absl::MutexLock lock(&mu_);
  if (!created) {
    auto it = live_.find(sweep.sweep_id());
    return it == live_.end() ? sweep : it->second.sweep;
  }
  Live live;
  live.sweep = std::move(sweep);
  live.expanded = *std::move(expanded);
  RL_LOG_INFO("sweep {} ({}) submitted by {}: {} trials, {} at once",
              live.sweep.sweep_id(), live.sweep.spec().name(), owner,
              live.sweep.trials_size(), live.sweep.spec().concurrency());
  const std::string id = live.sweep.sweep_id();
  live_.emplace(id, std::move(live));
  return AdvanceOneLocked(id);
}

absl::StatusOr<Sweep> SweepManager::Get(const std::string& sweep_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(sweep_id);
    if (it != live_.end()) return it->second.sweep;
  }
  return store_->GetSweep(sweep_id);
}

absl::StatusOr<ListSweepsResponse> SweepManager::List() {
  ASSIGN_OR_RETURN(std::vector<Sweep> sweeps,
                   store_->ListSweeps(false, kMaxListedSweeps));
  ListSweepsResponse response;
  absl::MutexLock lock(&mu_);
  int trials = 0;  // listed so far: the newest sweeps' until the budget
  for (Sweep& sweep : sweeps) {
    auto it = live_.find(sweep.sweep_id());
    Sweep* listed = response.add_sweeps();
    *listed = it == live_.end() ? std::move(sweep) : it->second.sweep;
    trials += listed->trials_size();
    if (trials > kMaxListedTrials) listed->clear_trials();
  }
  return response;
}

absl::StatusOr<Sweep> SweepManager::Cancel(const std::string& sweep_id,
                                           const Requester& by) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(sweep_id);
  if (it == live_.end()) {  // ended (or unknown: NOT_FOUND)
    ASSIGN_OR_RETURN(Sweep ended, store_->GetSweep(sweep_id));
    RETURN_IF_ERROR(
        CheckOwnerOrAdmin(absl::StrCat("sweep ", sweep_id), ended.owner(), by));
    return ended;
  }
  Live& live = it->second;
  RETURN_IF_ERROR(CheckOwnerOrAdmin(absl::StrCat("sweep ", sweep_id),
                                    live.sweep.owner(), by));
  for (Trial& trial : *live.sweep.mutable_trials()) {
    if (IsFinal(trial.state())) continue;
    if (!RunsThisRound(live.sweep, trial) ||
        WaitsForTheRound(live.sweep, trial)) {
      trial.set_state(CANCELLED);
      trial.set_reason(trial.run_id().empty()
                           ? "not started: the sweep was cancelled"
                           : "between rounds: the sweep was cancelled");
      continue;
    }
    CancelTrialRun(
        live.sweep, &trial,
        absl::StrCat("its sweep ", sweep_id, " was cancelled by ", by.name));
  }
  live.sweep.set_state(CANCELLED);
  live.sweep.set_reason(absl::StrCat("cancelled by ", by.name));
  SetNow(live.sweep.mutable_update_time());
  WriteLocked(&live);
  Sweep out = live.sweep;
  live_.erase(it);
  return out;
}

Sweep SweepManager::AdvanceOneLocked(const std::string& sweep_id) {
  auto it = live_.find(sweep_id);
  const bool ended = AdvanceLocked(&it->second);
  Sweep out = it->second.sweep;
  if (ended) live_.erase(it);
  return out;
}

void SweepManager::Tick() {
  absl::MutexLock lock(&mu_);
  for (auto it = live_.begin(); it != live_.end();) {
    if (AdvanceLocked(&it->second)) {
      it = live_.erase(it);
    } else {
      ++it;
    }
  }
}

bool SweepManager::AdvanceLocked(Live* live) {
  Sweep& sweep = live->sweep;
  if (IsPbt(sweep)) return AdvancePbtLocked(live);
  int unfinished = 0;
  for (Trial& trial : *sweep.mutable_trials()) {
    if (trial.run_id().empty() || IsFinal(trial.state())) continue;
    FollowTrialLocked(live, &trial);
    if (!IsFinal(trial.state())) ++unfinished;
  }
  for (Trial& trial : *sweep.mutable_trials()) {
    if (unfinished >= sweep.spec().concurrency()) break;
    if (!trial.run_id().empty() || IsFinal(trial.state())) continue;
    SubmitTrialLocked(live, &trial);
    if (trial.run_id().empty() && !IsFinal(trial.state())) break;  // later
    if (!IsFinal(trial.state())) ++unfinished;
  }
  // An external sweep waits for its max_trials configurations.
  const bool ended =
      std::all_of(sweep.trials().begin(), sweep.trials().end(),
                  [](const Trial& t) { return IsFinal(t.state()); }) &&
      (sweep.spec().method() != "external" ||
       ConfigurationsOf(sweep) >= sweep.spec().max_trials());
  if (ended) FinishLocked(live);
  WriteLocked(live);
  return ended;
}

void SweepManager::FollowTrialLocked(Live* live, Trial* trial, Run* read) {
  const SweepSpec& spec = live->sweep.spec();
  absl::StatusOr<Run> run = core_->GetRun(trial->run_id());
  if (!run.ok()) {
    trial->set_state(FAILED);
    trial->set_reason(
        absl::StrCat("its run is gone: ", run.status().message()));
    return;
  }
  if (read != nullptr) *read = *run;
  trial->set_state(run->state());
  trial->set_env_steps(run->progress().env_steps());
  if (IsFinal(run->state())) trial->set_reason(run->failure_reason());
  // A progress report after an update is one point of the metric.
  const double mean_return = run->progress().mean_return();
  const int64_t version = run->progress().policy_version();
  auto seen = live->scored_version.find(trial->index());
  const int last_points = std::max(1, spec.metric().last_points());
  if (trial->recent_steps_size() != trial->recent_size()) {
    trial->clear_recent();  // stored before points had their steps
    trial->clear_recent_steps();
  }
  // Recovered: the report the stored points end with (its env steps and
  // return) was scored before the restart, and is not a new point.
  const int last = trial->recent_size() - 1;
  if (seen != live->scored_version.end() && seen->second == kRecovered &&
      last >= 0 && trial->recent_steps(last) == run->progress().env_steps() &&
      trial->recent(last) == mean_return) {
    seen->second = version;
  }
  if (!std::isnan(mean_return) &&
      (seen == live->scored_version.end() || seen->second != version)) {
    live->scored_version[trial->index()] = version;
    trial->add_recent(mean_return);
    trial->add_recent_steps(run->progress().env_steps());
    // One more than the score needs: the point before a rung that a later
    // report crossed.
    while (trial->recent_size() > last_points + 1) {
      trial->mutable_recent()->erase(trial->mutable_recent()->begin());
      trial->mutable_recent_steps()->erase(
          trial->mutable_recent_steps()->begin());
    }
  }
  const bool maximize = spec.metric().goal() != "min";
  // The best of the last `last_points` points at or before `steps`; the
  // newest point when none is that early. A pbt member's count from its
  // round's start: a copy's points from before it are its donor's, an
  // earlier round's are of other hyperparameters.
  const int64_t floor = IsPbt(live->sweep)
                            ? trial->round_start_env_steps()
                            : std::numeric_limits<int64_t>::min();
  auto score_at = [&](int64_t steps) {
    double best = kNaN;
    int taken = 0;
    for (int k = trial->recent_size() - 1; k >= 0 && taken < last_points; --k) {
      if (trial->recent_steps(k) > steps || trial->recent_steps(k) <= floor) {
        continue;
      }
      ++taken;
      if (Better(trial->recent(k), best, maximize)) best = trial->recent(k);
    }
    if (taken == 0 && trial->recent_size() > 0) {
      best = trial->recent(trial->recent_size() - 1);
    }
    return best;
  };
  const double score = score_at(std::numeric_limits<int64_t>::max());
  trial->set_score(score);
  if (IsFinal(trial->state())) return;
  // Rungs: each one reached is scored once and decided at once.
  const EarlyStopping& stopping = spec.early_stopping();
  if (stopping.kind() != "asha" && stopping.kind() != "median") return;
  const int64_t budget = spec.base().total_env_steps();
  while (true) {
    const int rung = trial->rung_scores_size();
    const int64_t steps = RungSteps(stopping, rung);
    if (steps <= 0 || trial->env_steps() < steps ||
        (budget > 0 && steps >= budget)) {
      return;
    }
    const double rung_score = score_at(steps);
    trial->add_rung_scores(rung_score);
    std::vector<double> at_rung;
    for (const Trial& other : live->sweep.trials()) {
      if (other.rung_scores_size() > rung) {
        at_rung.push_back(other.rung_scores(rung));
      }
    }
    if (KeepsGoing(stopping, maximize, rung_score, at_rung)) continue;
    const std::string reason = absl::StrCat(
        "stopped early at rung ", rung + 1, " (", steps,
        " env steps): ", spec.metric().series(), " ", Number(rung_score),
        stopping.kind() == "asha"
            ? absl::StrCat(" is not in the best 1/",
                           stopping.reduction_factor(), " of the ",
                           at_rung.size(), " trials that reached it")
            : absl::StrCat(" is worse than the median of the ", at_rung.size(),
                           " trials that reached it"));
    if (CancelTrialRun(live->sweep, trial, reason)) {
      RL_LOG_INFO("sweep {}: trial {} ({}) {}", live->sweep.sweep_id(),
                  trial->index(), trial->run_id(), reason);
    }
    return;
  }
}

void SweepManager::SubmitTrialLocked(Live* live, Trial* trial) {
  const SweepTrial& expanded = live->expanded[trial->index()];
  SubmitRunRequest request;
  *request.mutable_spec() = expanded.spec;
  request.set_idempotency_key(
      absl::StrCat(live->sweep.sweep_id(), "/", trial->index()));
  absl::StatusOr<SubmitRunResponse> submitted =
      core_->SubmitRun(request, live->sweep.owner());
  if (submitted.status().code() == absl::StatusCode::kResourceExhausted) {
    return;  // the owner's queue is full (or the store): next tick
  }
  if (!submitted.ok()) {
    trial->set_state(FAILED);
    trial->set_reason(absl::StrCat("submit: ", submitted.status().message()));
    return;
  }
  trial->set_run_id(submitted->run().run_id());
  trial->set_state(submitted->run().state());
  RL_LOG_INFO("sweep {}: trial {} is {} ({})", live->sweep.sweep_id(),
              trial->index(), trial->run_id(),
              DescribeParameters(expanded.parameters));
}

void SweepManager::FinishLocked(Live* live) {
  Sweep& sweep = live->sweep;
  const bool maximize = sweep.spec().metric().goal() != "min";
  // The best configuration by the mean score of its succeeded trials.
  std::map<int, std::pair<double, int>> sums;  // config -> (sum, count)
  for (const Trial& trial : sweep.trials()) {
    if (trial.state() != SUCCEEDED || std::isnan(trial.score())) continue;
    auto& [sum, count] = sums[trial.config()];
    sum += trial.score();
    ++count;
  }
  int best_config = -1;
  double best_mean = kNaN;
  for (const auto& [config, sum_count] : sums) {
    const double mean = sum_count.first / sum_count.second;
    if (Better(mean, best_mean, maximize)) {
      best_mean = mean;
      best_config = config;
    }
  }
  if (best_config < 0) {
    sweep.set_state(FAILED);
    sweep.set_reason(absl::StrCat("none of its ", sweep.trials_size(),
                                  " trials succeeded with a score"));
  } else {
    const Trial* best = nullptr;
    for (const Trial& trial : sweep.trials()) {
      if (trial.config() != best_config || trial.state() != SUCCEEDED ||
          std::isnan(trial.score())) {
        continue;
      }
      if (best == nullptr || Better(trial.score(), best->score(), maximize)) {
        best = &trial;
      }
    }
    sweep.set_state(SUCCEEDED);
    sweep.set_best_run_id(best->run_id());
  }
  SetNow(sweep.mutable_update_time());
  RL_LOG_INFO("sweep {} {}: best {} {}", sweep.sweep_id(),
              RunState_Name(sweep.state()), sweep.best_run_id(),
              sweep.reason());
}

void SweepManager::WriteLocked(Live* live) {
  const absl::Status status = StoreLocked(live);
  if (!status.ok()) {
    // Kept in memory (Get sees it); written on a later change.
    RL_LOG_WARNING("sweep {}: not written: {}", live->sweep.sweep_id(),
                   status.ToString());
  }
}

absl::Status SweepManager::StoreLocked(Live* live) {
  Sweep& sweep = live->sweep;
  sweep.set_trials_total(sweep.trials_size());
  sweep.set_trials_ended(static_cast<int32_t>(
      std::count_if(sweep.trials().begin(), sweep.trials().end(),
                    [](const Trial& t) { return IsFinal(t.state()); })));
  sweep.set_best_score(kNaN);
  for (const Trial& trial : sweep.trials()) {
    if (!sweep.best_run_id().empty() && trial.run_id() == sweep.best_run_id()) {
      sweep.set_best_score(trial.score());
    }
  }
  std::string now = live->sweep.SerializeAsString();
  if (now == live->stored) return absl::OkStatus();
  SetNow(live->sweep.mutable_update_time());
  now = live->sweep.SerializeAsString();
  RETURN_IF_ERROR(store_->PutSweep(live->sweep));
  live->stored = std::move(now);
  return absl::OkStatus();
}

}  // namespace rl
