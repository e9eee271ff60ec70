#include "trainer/local_sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "google/protobuf/util/json_util.h"
#include "runspec/pbt.h"
#include "trainer/local_trainer.h"

namespace rl {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One trial in flight: its trainer and the metric's points so far.
struct LiveTrial {
  TrialOutcome outcome;
  std::unique_ptr<LocalTrainer> trainer;
  std::vector<double> points;  // the mean return after each update
  bool finished = false;       // DONE, STOPPED or FAILED
};

// Best of the last `n` points that exist (NaN: none).
double Score(const std::vector<double>& points, int n, bool maximize) {
  double best = kNaN;
  int seen = 0;
  for (auto it = points.rbegin(); it != points.rend() && seen < n; ++it) {
    if (std::isnan(*it)) continue;
    ++seen;
    if (std::isnan(best) || (maximize ? *it > best : *it < best)) best = *it;
  }
  return best;
}

std::string Number(double v) {
  return std::isnan(v) ? "-" : absl::StrFormat("%.2f", v);
}

std::string ValueText(const google::protobuf::Value& value) {
  if (value.has_number_value()) {
    return absl::StrFormat("%.4g", value.number_value());
  }
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(value, &json);
  return json;
}

// Trains `live` up to `steps` env steps (or its end); records its points.
void TrainTo(LiveTrial* live, int64_t steps, int last_points, bool maximize) {
  LocalTrainer& trainer = *live->trainer;
  const RunSpec& spec = live->outcome.trial.spec;
  const int64_t per_update =
      static_cast<int64_t>(spec.envs_per_actor()) * spec.segment_length();
  const int64_t remaining = steps - trainer.progress().env_steps;
  const int64_t updates =
      std::max<int64_t>(1, (remaining + per_update - 1) / per_update);
  absl::StatusOr<TrainResult> result = trainer.Train(
      [&](const TrainerProgress& p) { live->points.push_back(p.mean_return); },
      updates);
  TrialOutcome& out = live->outcome;
  out.env_steps = trainer.progress().env_steps;
  out.score = Score(live->points, last_points, maximize);
  if (!result.ok()) {
    out.state = "FAILED";
    out.reason = std::string(result.status().message());
    live->finished = true;
    return;
  }
  out.checkpoint = result->last_checkpoint;
  out.target_reached = result->target_reached;
  if (trainer.Done()) {
    out.state = "DONE";
    live->finished = true;
  }
}

// Runs `work(i)` for i in [0, n) on `threads` threads.
void ForEach(int n, int threads, const std::function<void(int)>& work) {
  std::mutex mu;
  int next = 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, std::min(threads, n)); ++t) {
    pool.emplace_back([&] {
      while (true) {
        int i;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (next >= n) return;
          i = next++;
        }
        work(i);
      }
    });
  }
  for (auto& thread : pool) thread.join();
}

TrainerOptions OptionsFor(const LocalSweepOptions& options,
                          const RunSpec& spec) {
  TrainerOptions trainer_options;
  trainer_options.env_threads = options.env_threads;
  if (!options.sweep_dir.empty()) {
    trainer_options.run_dir =
        (std::filesystem::path(options.sweep_dir) / spec.name()).string();
  }
  return trainer_options;
}

// Trains every unfinished trial to `target` env steps, `concurrency` at a
// time; logs those that ended. Returns the trials it trained.
std::vector<int> TrainAllTo(std::vector<LiveTrial>& live, int64_t target,
                            const SweepSpec& spec,
                            const std::function<void(const std::string&)>& log,
                            const std::string& what) {
  const bool maximize = spec.metric().goal() != "min";
  std::vector<int> running;
  for (size_t i = 0; i < live.size(); ++i) {
    if (!live[i].finished) running.push_back(static_cast<int>(i));
  }
  if (running.empty()) return running;
  log(absl::StrCat(what, "training ", running.size(), " trial(s) to ", target,
                   " env steps"));
  ForEach(static_cast<int>(running.size()), spec.concurrency(), [&](int k) {
    TrainTo(&live[running[k]], target, spec.metric().last_points(), maximize);
  });
  for (int i : running) {
    const TrialOutcome& out = live[i].outcome;
    if (out.state == "DONE" || out.state == "FAILED") {
      log(absl::StrCat(out.trial.spec.name(), ": ", out.state, " at ",
                       out.env_steps, " env steps, score ", Number(out.score),
                       out.state == "FAILED" ? ": " + out.reason : ""));
    }
  }
  return running;
}

// Exploit: `to` goes on from `from`'s last checkpoint (weights, optimiser,
// normalisers, environments and their random streams, counters, return
// window) with the explored hyperparameters of `copy`. Changes nothing
// unless it succeeds. The new trainer is made while the old one lives: a
// member's memory twice over, for a moment.
absl::Status CopyMember(const SweepSpec& spec, const LocalSweepOptions& options,
                        const PbtCopy& copy, const LiveTrial& from,
                        LiveTrial* to) {
  if (from.outcome.checkpoint.empty()) {
    return absl::InternalError(
        absl::StrCat("trial ", copy.donor, " wrote no checkpoint to copy"));
  }
  const SweepTrial& trial = to->outcome.trial;
  ASSIGN_OR_RETURN(SweepTrial next,
                   MakeSweepTrial(spec, copy.parameters, trial.index,
                                  trial.config, trial.seed_offset));
  ASSIGN_OR_RETURN(
      std::unique_ptr<LocalTrainer> trainer,
      LocalTrainer::Create(next.spec, OptionsFor(options, next.spec)));
  RETURN_IF_ERROR(trainer->Restore(from.outcome.checkpoint));
  to->trainer = std::move(trainer);
  to->points = from.points;  // its return window is the donor's now
  TrialOutcome& out = to->outcome;
  out.trial = std::move(next);
  out.score = from.outcome.score;
  out.env_steps = from.outcome.env_steps;
  out.checkpoint = from.outcome.checkpoint;
  // The weights' history: the donor's copies, then this one.
  out.lineage = from.outcome.lineage;
  out.lineage.push_back(absl::StrCat("trial ", copy.trial, " at ",
                                     out.env_steps,
                                     " env steps: ", copy.description));
  return absl::OkStatus();
}

// Population-based training: the population trains in rounds of
// pbt.interval_steps; after each, the worst members copy the best ones
// and explore from their hyperparameters (runspec/pbt.h decides).
void RunPbtRounds(const SweepSpec& spec, const LocalSweepOptions& options,
                  std::vector<LiveTrial>& live,
                  const std::function<void(const std::string&)>& log) {
  const bool maximize = spec.metric().goal() != "min";
  std::mt19937_64 rng(spec.seed() ^ 0x9e3779b97f4a7c15ULL);
  const int64_t budget = spec.base().total_env_steps();
  for (int round = 0;; ++round) {
    const int64_t target = PbtRoundSteps(spec, round);
    const std::vector<int> trained = TrainAllTo(
        live, target, spec, log, absl::StrCat("round ", round + 1, ": "));
    if (trained.empty()) break;
    if (target >= budget) continue;
    std::vector<PbtMember> members;
    for (int i : trained) {
      if (live[i].finished) continue;
      PbtMember m;
      m.trial = i;
      m.score = live[i].outcome.score;
      m.parameters = live[i].outcome.trial.parameters;
      members.push_back(std::move(m));
    }
    for (const PbtCopy& copy : PlanPbtRound(spec, maximize, members, &rng)) {
      LiveTrial& to = live[copy.trial];
      const absl::Status copied =
          CopyMember(spec, options, copy, live[copy.donor], &to);
      const std::string name = to.outcome.trial.spec.name();
      if (!copied.ok()) {
        // Its own state is untouched (CopyMember changes nothing until the
        // copy is made): it goes on with it.
        log(absl::StrCat(name, ": could not copy trial ", copy.donor, " (",
                         copied.message(), "); it goes on as it was"));
        continue;
      }
      log(to.outcome.lineage.back());
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<TrialOutcome>> RunLocalSweep(
    const SweepSpec& spec, const LocalSweepOptions& options) {
  if (spec.metric().series() != kLocalSweepSeries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric.series: rl_local scores ", kLocalSweepSeries,
        " (the mean return of the last 100 episodes); \"",
        spec.metric().series(), "\" needs the coordinator's telemetry"));
  }
  if (spec.method() == "external") {
    return absl::InvalidArgumentError(
        "method: rl_local draws its own trials (grid or random); external "
        "trials come from a client through the coordinator (rlctl sweep "
        "submit --optuna)");
  }
  if (spec.method() == "pbt" && options.sweep_dir.empty()) {
    return absl::InvalidArgumentError(
        "method pbt: its members copy each other's checkpoints; give the "
        "sweep a directory (--run_dir)");
  }
  ASSIGN_OR_RETURN(std::vector<SweepTrial> trials, ExpandSweep(spec));
  const auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  const bool maximize = spec.metric().goal() != "min";
  const int last_points = spec.metric().last_points();
  std::vector<LiveTrial> live(trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    TrialOutcome& out = live[i].outcome;
    out.trial = std::move(trials[i]);
    out.score = kNaN;
    auto trainer = LocalTrainer::Create(out.trial.spec,
                                        OptionsFor(options, out.trial.spec));
    if (!trainer.ok()) {
      out.state = "FAILED";
      out.reason = std::string(trainer.status().message());
      live[i].finished = true;
      continue;
    }
    live[i].trainer = *std::move(trainer);
  }

  if (spec.method() == "pbt") {
    RunPbtRounds(spec, options, live, log);
    std::vector<TrialOutcome> outcomes;
    for (LiveTrial& t : live) outcomes.push_back(std::move(t.outcome));
    return outcomes;
  }
  const EarlyStopping& stopping = spec.early_stopping();
  const bool early = stopping.kind() != "none";
  const int64_t budget = spec.base().total_env_steps();
  for (int rung = 0;; ++rung) {
    const int64_t target =
        early ? std::min(RungSteps(stopping, rung), budget) : budget;
    const std::vector<int> running = TrainAllTo(live, target, spec, log, "");
    if (running.empty()) break;
    if (!early || target >= budget) continue;
    // The rung decides over every trial that reached it, stopped or not.
    std::vector<double> scores;
    for (const LiveTrial& t : live) {
      if (t.outcome.env_steps >= target && t.outcome.state != "FAILED") {
        scores.push_back(Score(t.points, last_points, maximize));
      }
    }
    for (int i : running) {
      LiveTrial& t = live[i];
      if (t.finished) continue;
      if (KeepsGoing(stopping, maximize, t.outcome.score, scores)) continue;
      t.finished = true;
      t.outcome.state = "STOPPED";
      // Rungs are numbered from 1, as the coordinator's sweeps number them.
      t.outcome.reason = absl::StrCat(
          "stopped early at rung ", rung + 1, " (", target, " env steps) by ",
          stopping.kind(), ": score ", Number(t.outcome.score),
          stopping.kind() == "asha"
              ? absl::StrCat(" is not in the best 1/",
                             stopping.reduction_factor(), " of the ")
              : std::string(" is worse than the median of the "),
          scores.size(), " trials that reached it");
      if (t.trainer != nullptr) {
        auto checkpoint = t.trainer->WriteCheckpoint();
        if (checkpoint.ok()) t.outcome.checkpoint = *checkpoint;
      }
      log(absl::StrCat(t.outcome.trial.spec.name(), ": ", t.outcome.reason));
    }
  }
  std::vector<TrialOutcome> outcomes;
  for (LiveTrial& t : live) outcomes.push_back(std::move(t.outcome));
  return outcomes;
}

absl::StatusOr<std::vector<TrialOutcome>> RunLocalSweepFile(
    const std::string& path, std::string sweep_dir, int env_threads) {
  ASSIGN_OR_RETURN(const SweepSpec spec, LoadSweepSpecFile(path));
  if (sweep_dir.empty()) sweep_dir = "runs/" + spec.name();
  const std::string stopping =
      spec.method() == "pbt"
          ? absl::StrFormat(
                "every %d env steps the worst %g copy the best "
                "(perturbed by %s, resampled with probability %g)",
                spec.pbt().interval_steps(), spec.pbt().fraction(),
                absl::StrJoin(spec.pbt().perturb_factors(), "/"),
                spec.pbt().resample_probability())
          : "early stopping " + spec.early_stopping().kind();
  std::printf(
      "sweep %s: %s search, up to %d configurations x %d seed(s), %d at a "
      "time, %s %s (best of the last %d), %s\n",
      spec.name().c_str(), spec.method().c_str(), spec.max_trials(),
      spec.seeds_per_config(), spec.concurrency(), spec.metric().goal().c_str(),
      spec.metric().series().c_str(), spec.metric().last_points(),
      stopping.c_str());
  std::fflush(stdout);
  LocalSweepOptions options;
  options.sweep_dir = sweep_dir;
  options.env_threads = env_threads;
  options.log = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  ASSIGN_OR_RETURN(std::vector<TrialOutcome> outcomes,
                   RunLocalSweep(spec, options));
  const std::string table = SweepTable(spec, outcomes);
  std::printf("%s", table.c_str());
  std::fflush(stdout);
  std::error_code ec;
  std::filesystem::create_directories(sweep_dir, ec);
  std::ofstream(std::filesystem::path(sweep_dir) / "results.txt") << table;
  return outcomes;
}

std::string SweepTable(const SweepSpec& spec,
                       const std::vector<TrialOutcome>& outcomes) {
  const bool maximize = spec.metric().goal() != "min";
  std::vector<const TrialOutcome*> order;
  for (const TrialOutcome& o : outcomes) order.push_back(&o);
  std::stable_sort(order.begin(), order.end(), [&](auto* a, auto* b) {
    if (std::isnan(a->score)) return false;
    if (std::isnan(b->score)) return true;
    return maximize ? a->score > b->score : a->score < b->score;
  });
  std::vector<std::string> paths;
  if (!outcomes.empty()) {
    for (const auto& [path, value] : outcomes[0].trial.parameters) {
      paths.push_back(path);
    }
  }
  std::string table = absl::StrFormat("%-6s %-8s %12s %10s", "trial", "state",
                                      "score", "env_steps");
  for (const std::string& path : paths) {
    absl::StrAppend(&table, absl::StrFormat("  %-20s", path));
  }
  absl::StrAppend(&table, "\n");
  for (const TrialOutcome* o : order) {
    absl::StrAppend(
        &table, absl::StrFormat("%-6d %-8s %12s %10d", o->trial.index, o->state,
                                Number(o->score), o->env_steps));
    for (const std::string& path : paths) {
      absl::StrAppend(
          &table,
          absl::StrFormat("  %-20s", ValueText(o->trial.parameters.at(path))));
    }
    absl::StrAppend(&table, "\n");
  }
  for (const TrialOutcome* o : order) {
    if (o->lineage.empty()) continue;
    absl::StrAppend(&table, "lineage of trial ", o->trial.index, ":\n");
    for (const std::string& step : o->lineage) {
      absl::StrAppend(&table, "  ", step, "\n");
    }
  }
  // The best configuration: the mean of its seeds' scores.
  std::map<int, std::pair<double, int>> by_config;
  for (const TrialOutcome& o : outcomes) {
    if (std::isnan(o.score)) continue;
    auto& [sum, n] = by_config[o.trial.config];
    sum += o.score;
    ++n;
  }
  int best = -1;
  double best_score = kNaN;
  for (const auto& [config, sum_n] : by_config) {
    const double mean = sum_n.first / sum_n.second;
    if (best < 0 || (maximize ? mean > best_score : mean < best_score)) {
      best = config;
      best_score = mean;
    }
  }
  for (const TrialOutcome& o : outcomes) {
    if (o.trial.config != best) continue;
    absl::StrAppend(&table, "best: ", DescribeParameters(o.trial.parameters),
                    ": ", spec.metric().series(), " ", Number(best_score),
                    spec.seeds_per_config() > 1 ? " (mean of its seeds)" : "",
                    o.checkpoint.empty() ? "" : ", checkpoint " + o.checkpoint,
                    "\n");
    break;
  }
  return table;
}

}  // namespace rl
