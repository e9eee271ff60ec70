// Whether a checkpoint directory loads into a fresh network of a run's
// spec: the check the chaos suites make of every checkpoint they keep.
#ifndef RL_TESTING_RUN_CHECKPOINT_H_
#define RL_TESTING_RUN_CHECKPOINT_H_

#include <string>

#include "absl/status/status.h"
#include "proto/common.pb.h"

namespace rl {

absl::Status LoadRunCheckpoint(const RunSpec& spec, const std::string& dir);

}  // namespace rl

#endif  // RL_TESTING_RUN_CHECKPOINT_H_
