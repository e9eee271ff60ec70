// SweepManager after a coordinator restart: the unfinished sweeps back
// from the store, their trials expanded again (sweep_manager.h).
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/sweep_manager.h"
#include "coordinator/sweep_trial_state.h"

namespace rl {

absl::Status SweepManager::Recover() {
  ASSIGN_OR_RETURN(std::vector<Sweep> sweeps,
                   store_->ListSweeps(/*unfinished_only=*/true,
                                      std::numeric_limits<int>::max()));
  absl::MutexLock lock(&mu_);
  for (Sweep& sweep : sweeps) {
    Live live;
    live.sweep = std::move(sweep);
    live.stored = live.sweep.SerializeAsString();
    absl::Status rebuilt = RebuildTrials(&live);
    if (!rebuilt.ok()) {
      // Its run files meant something else. Its trials' runs are not
      // cancelled (hours of training, for a newer build's stricter rules):
      // the reason names them, for their owner to keep or cancel.
      std::vector<std::string> going;
      for (const Trial& trial : live.sweep.trials()) {
        if (!IsFinal(trial.state()) && !trial.run_id().empty()) {
          going.push_back(trial.run_id());
        }
      }
      live.sweep.set_state(FAILED);
      live.sweep.set_reason(absl::StrCat(
          "cannot be recovered: ", rebuilt.message(),
          going.empty() ? ""
                        : absl::StrCat("; its trials' runs go on as runs of "
                                       "their own: ",
                                       absl::StrJoin(going, ", "))));
      RL_LOG_WARNING("sweep {}: {}", live.sweep.sweep_id(),
                     live.sweep.reason());
      WriteLocked(&live);
      continue;
    }
    for (const Trial& trial : live.sweep.trials()) {
      if (trial.recent_size() > 0)
        live.scored_version[trial.index()] = kRecovered;
    }
    RL_LOG_INFO("sweep {} recovered: {} trials", live.sweep.sweep_id(),
                live.sweep.trials_size());
    const std::string id = live.sweep.sweep_id();
    live_.emplace(id, std::move(live));
  }
  return absl::OkStatus();
}

absl::Status SweepManager::RebuildTrials(Live* live) {
  live->expanded.clear();
  for (const Trial& trial : live->sweep.trials()) {
    const std::map<std::string, google::protobuf::Value> parameters(
        trial.parameters().begin(), trial.parameters().end());
    ASSIGN_OR_RETURN(
        SweepTrial expanded,
        MakeSweepTrial(live->sweep.spec(), parameters, trial.index(),
                       trial.config(), trial.seed_offset()));
    live->expanded.push_back(std::move(expanded));
  }
  return absl::OkStatus();
}

}  // namespace rl
