// What ActorClient's two sources share: actor_client.cc (lifecycle, step
// loop) and learner_link.cc (the streams to the learner). Private to the
// actor_client target.
#ifndef RL_ACTOR_ACTOR_CLIENT_INTERNAL_H_
#define RL_ACTOR_ACTOR_CLIENT_INTERNAL_H_

#include <string>

#include "absl/time/time.h"

namespace rl {
namespace actor_client_internal {

// How often blocked waits wake to check the connection watchdog.
inline constexpr absl::Duration kPollInterval = absl::Milliseconds(200);

std::string FormatDelay(absl::Duration delay);

void SetThreadName(const char* name);

}  // namespace actor_client_internal
}  // namespace rl

#endif  // RL_ACTOR_ACTOR_CLIENT_INTERNAL_H_
