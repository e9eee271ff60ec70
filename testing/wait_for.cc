#include "testing/wait_for.h"

#include "absl/time/clock.h"

namespace rl {

bool WaitFor(const std::function<bool()>& predicate, absl::Duration timeout,
             absl::Duration poll) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (predicate()) return true;
    absl::SleepFor(poll);
  }
  return predicate();
}

}  // namespace rl
