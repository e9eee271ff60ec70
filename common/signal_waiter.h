// Stop signals (SIGTERM, SIGINT) taken synchronously, the one idiom every
// main uses: BlockStopSignals() first thing in main(), before any thread
// starts, so every thread inherits the mask and no handler ever runs; the
// main thread then waits with WaitForStopSignal(). Stopping happens in an
// ordinary thread, where locks and logging are safe.
//
// Child processes started through common/subprocess.h get an empty mask.
#ifndef RL_COMMON_SIGNAL_WAITER_H_
#define RL_COMMON_SIGNAL_WAITER_H_

#include <functional>

#include "absl/time/time.h"

namespace rl {

// Blocks SIGTERM and SIGINT in the calling thread (and the threads it
// starts afterwards).
void BlockStopSignals();

// Waits up to `timeout` for SIGTERM or SIGINT. Returns the signal, or 0 if
// none arrived. The signals must be blocked (BlockStopSignals).
int WaitForStopSignal(absl::Duration timeout);

// Waits until a stop signal arrives (returns it) or `done()` is true
// (returns 0); `done` is evaluated every `poll`.
int WaitForStopSignalOr(const std::function<bool()>& done,
                        absl::Duration poll = absl::Milliseconds(200));

}  // namespace rl

#endif  // RL_COMMON_SIGNAL_WAITER_H_
