// What a worker may register: its name, addresses and devices are shown to
// operators (rlctl workers) and written to logs, so they are checked
// (INVALID_ARGUMENT naming the field, the value quoted short and escaped).
#ifndef RL_COORDINATOR_REGISTRATION_CHECK_H_
#define RL_COORDINATOR_REGISTRATION_CHECK_H_

#include "absl/status/status.h"
#include "proto/coordinator.pb.h"

namespace rl {

// worker_name: 1-128 bytes of letters, digits and "._-:@/[]"; address and
// rendezvous_address (when given): 1-256 bytes of letters, digits and
// "._-:[]%"; at most 64 devices of 1-32 bytes of letters, digits and ":_-".
absl::Status CheckRegistration(const RegisterWorkerRequest& request);

}  // namespace rl

#endif  // RL_COORDINATOR_REGISTRATION_CHECK_H_
