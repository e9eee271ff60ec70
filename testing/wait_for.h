// Waiting in tests without sleeping as synchronisation: poll a condition
// until it holds or a deadline passes, tolerating "not there yet".
#ifndef RL_TESTING_WAIT_FOR_H_
#define RL_TESTING_WAIT_FOR_H_

#include <functional>

#include "absl/time/time.h"

namespace rl {

// True as soon as `predicate()` is; false if it still is not after
// `timeout`. `predicate` is evaluated every `poll` (and once more at the
// deadline). Deadlines in tests are generous: a loaded 2-core machine is
// slow, and a passing test returns as soon as the condition holds.
bool WaitFor(const std::function<bool()>& predicate, absl::Duration timeout,
             absl::Duration poll = absl::Milliseconds(10));

}  // namespace rl

#endif  // RL_TESTING_WAIT_FOR_H_
