#include "common/signal_waiter.h"

#include <signal.h>

#include <cerrno>
#include <ctime>

#include "absl/time/clock.h"

namespace rl {
namespace {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockStopSignals() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForStopSignal(absl::Duration timeout) {
  const sigset_t set = StopSignals();
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return 0;
    const timespec wait = absl::ToTimespec(left);
    const int signal = sigtimedwait(&set, nullptr, &wait);
    if (signal > 0) return signal;
    if (errno != EINTR) return 0;  // EAGAIN: the timeout passed
  }
}

int WaitForStopSignalOr(const std::function<bool()>& done,
                        absl::Duration poll) {
  while (!done()) {
    const int signal = WaitForStopSignal(poll);
    if (signal != 0) return signal;
  }
  return 0;
}

}  // namespace rl
