// Run ends the store could not take (it was full): kept here, shown on
// every read of the run, and written once there is room, so a run's end
// is visible at once whatever the disk does. In memory only: a coordinator
// restarted meanwhile recovers the run as the store last had it.
#ifndef RL_COORDINATOR_PENDING_ENDS_H_
#define RL_COORDINATOR_PENDING_ENDS_H_

#include <map>
#include <string>
#include <vector>

#include "coordinator/run_store.h"
#include "proto/coordinator.pb.h"

namespace rl {

class PendingEnds {
 public:
  // Run `run_id` ended in `state` (terminal) for `reason`, not yet written.
  void Keep(const std::string& run_id, RunState state, std::string reason);
  // `run` as its pending end says, if it has one.
  void Apply(Run* run) const;
  // Writes what `store` has room for; the runs written go to `written`.
  void Write(RunStore* store, std::vector<Run>* written);
  bool empty() const { return ends_.empty(); }

 private:
  struct End {
    RunState state = RUN_STATE_UNSPECIFIED;
    std::string reason;
  };
  std::map<std::string, End> ends_;
};

}  // namespace rl

#endif  // RL_COORDINATOR_PENDING_ENDS_H_
