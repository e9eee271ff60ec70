#include "coordinator/pending_ends.h"

#include <utility>

#include "common/logging.h"

namespace rl {

void PendingEnds::Keep(const std::string& run_id, RunState state,
                       std::string reason) {
  ends_[run_id] = {state, std::move(reason)};
}

void PendingEnds::Apply(Run* run) const {
  const auto end = ends_.find(run->run_id());
  if (end == ends_.end()) return;
  run->set_state(end->second.state);
  if (end->second.state == FAILED) run->set_failure_reason(end->second.reason);
  run->clear_waiting_reason();
}

void PendingEnds::Write(RunStore* store, std::vector<Run>* written) {
  for (auto it = ends_.begin(); it != ends_.end();) {
    absl::StatusOr<Run> run =
        store->Transition(it->first, it->second.state, it->second.reason);
    if (run.status().code() == absl::StatusCode::kResourceExhausted) {
      ++it;  // still full
      continue;
    }
    if (run.ok()) {
      written->push_back(*std::move(run));
    } else {
      RL_LOG_ERROR("cannot write the end of run {}: {}", it->first,
                   run.status().ToString());
    }
    it = ends_.erase(it);
  }
}

}  // namespace rl
