// What a run needs, estimated from its resolved spec before anything is
// allocated: the bytes of one rollout segment and of one policy on the wire,
// and the memory of one actor and of one learner rank. Admission compares
// these with the configured limits (at submit) and with what each registered
// worker reports (at placement), so a run whose fields are each in range but
// whose product is not is refused or waits with a reason, rather than
// aborting its workers on an allocation.
//
// The estimates are deliberately simple (a sum over the tensors each process
// holds, with the copies the code makes) and err on the large side; they are
// not a profiler.
#ifndef RL_RUNSPEC_RUN_FOOTPRINT_H_
#define RL_RUNSPEC_RUN_FOOTPRINT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "proto/common.pb.h"

namespace rl {

struct RunFootprint {
  // Doubles: the fields' product can exceed int64 (2^20 envs x 2^16 steps x
  // a wide observation).
  double parameters = 0;     // weights of the actor-critic
  double policy_bytes = 0;   // one policy publication on the wire
  double segment_bytes = 0;  // one rollout segment on the wire
  double actor_bytes = 0;    // memory of one actor process's run state
  double learner_bytes = 0;  // memory of one learner rank's run state
  // With a policies block these count every policy (one publication
  // carries them all). With resources.learner_per_policy, the largest
  // message of rows the run's learner sends a policy's learner, and that
  // policy's name (0 and empty otherwise); learner_bytes then also counts
  // those messages (every policy's at once), and every learner is held to
  // it, though a policy's own learner needs less.
  double policy_rows_bytes = 0;
  std::string policy_rows_name;
};

// `spec` must be resolved (ResolveRunSpec: the env's sizes filled in).
RunFootprint EstimateRunFootprint(const RunSpec& spec);

// Limits a deployment sets; 0 disables a limit.
struct FootprintLimits {
  double max_message_bytes = 0;  // one gRPC message (segment or policy)
  double max_actor_bytes = 0;
  double max_learner_bytes = 0;
};

// What the coordinator admits by default and rl_local always: 256 MiB
// messages (coordinator_main --max_message_mb), no memory limit.
inline FootprintLimits DefaultFootprintLimits() {
  FootprintLimits limits;
  limits.max_message_bytes = 256 << 20;
  return limits;
}

// INVALID_ARGUMENT naming the fields that size what is over its limit and
// the estimate, e.g. "envs_per_actor x segment_length: one rollout segment
// is about 1.5 TiB, over the 256 MiB message limit (...)".
absl::Status CheckRunFootprint(const RunSpec& spec, const RunFootprint& need,
                               const FootprintLimits& limits);

// 1536 -> "1.5 KiB".
std::string FormatBytes(double bytes);

}  // namespace rl

#endif  // RL_RUNSPEC_RUN_FOOTPRINT_H_
