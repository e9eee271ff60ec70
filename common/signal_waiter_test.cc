#include "common/signal_waiter.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(SignalWaiterTest, TimesOutWithoutASignal) {
  BlockStopSignals();
  EXPECT_EQ(WaitForStopSignal(absl::Milliseconds(20)), 0);
}

TEST(SignalWaiterTest, TakesASignalSentToTheProcessFromAnotherThread) {
  BlockStopSignals();
  std::thread sender([] { kill(getpid(), SIGTERM); });
  // The signal stays pending until taken, so the order does not matter.
  EXPECT_EQ(WaitForStopSignal(absl::Seconds(30)), SIGTERM);
  sender.join();
}

TEST(SignalWaiterTest, ReturnsZeroWhenDoneBecomesTrue) {
  BlockStopSignals();
  std::atomic<int> calls{0};
  EXPECT_EQ(
      WaitForStopSignalOr([&] { return ++calls >= 3; }, absl::Milliseconds(1)),
      0);
  EXPECT_EQ(calls.load(), 3);
}

TEST(SignalWaiterTest, SignalEndsTheWaitBeforeDone) {
  BlockStopSignals();
  kill(getpid(), SIGINT);
  EXPECT_EQ(WaitForStopSignalOr([] { return false; }, absl::Seconds(30)),
            SIGINT);
}

}  // namespace
}  // namespace rl
