#include "common/backoff.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(BackoffTest, DoublesWithJitterUpToTheMaximumAndResets) {
  Backoff::Options options;
  options.initial = absl::Milliseconds(100);
  options.max = absl::Milliseconds(500);
  options.seed = 7;
  Backoff backoff(options);
  const absl::Duration steps[] = {
      absl::Milliseconds(100), absl::Milliseconds(200), absl::Milliseconds(400),
      absl::Milliseconds(500), absl::Milliseconds(500)};
  for (absl::Duration step : steps) {
    const absl::Duration delay = backoff.Next();
    EXPECT_GE(delay, step * 0.8);
    EXPECT_LT(delay, step * 1.2);
  }
  EXPECT_EQ(backoff.failures(), 5);
  backoff.Reset();
  EXPECT_EQ(backoff.failures(), 0);
  EXPECT_LT(backoff.Next(), absl::Milliseconds(120));
}

TEST(BackoffTest, JitterSpreadsClientsThatFailedTogether) {
  Backoff::Options options;
  options.min_jitter = 0.5;
  options.max_jitter = 1.0;
  options.seed = 1;
  Backoff a(options);
  options.seed = 2;
  Backoff b(options);
  bool differ = false;
  for (int i = 0; i < 4; ++i) differ |= a.Next() != b.Next();
  EXPECT_TRUE(differ);
}

}  // namespace
}  // namespace rl
