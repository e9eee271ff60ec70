#include "common/log_limiter.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(LogLimiterTest, EachKeyHasItsOwnBudgetAndLaterLinesCountTheLeftOut) {
  LogLimiter limiter(/*lines_per_period=*/2, absl::Minutes(1));
  const absl::Time t0 = absl::UnixEpoch() + absl::Hours(1);
  std::string left_out;
  EXPECT_TRUE(limiter.Allow("mallory", t0, &left_out));
  EXPECT_TRUE(limiter.Allow("mallory", t0, &left_out));
  EXPECT_EQ(left_out, "");
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(limiter.Allow("mallory", t0 + absl::Seconds(1), &left_out));
  }
  // Another caller still gets its lines.
  EXPECT_TRUE(limiter.Allow("alice", t0 + absl::Seconds(2), &left_out));
  EXPECT_EQ(left_out, "");
  // The next period: mallory's first line says what was left out.
  EXPECT_TRUE(limiter.Allow("mallory", t0 + absl::Minutes(1), &left_out));
  EXPECT_EQ(left_out, " (1000 more like it not logged)");
  EXPECT_TRUE(limiter.Allow("mallory", t0 + absl::Minutes(1), &left_out));
  EXPECT_EQ(left_out, "");
}

TEST(LogLimiterTest, ManyKeysShareOneBudgetBeyondTheLimit) {
  LogLimiter limiter(/*lines_per_period=*/1, absl::Minutes(1),
                     /*max_keys=*/10);
  const absl::Time t0 = absl::UnixEpoch() + absl::Hours(1);
  std::string left_out;
  int logged = 0;
  for (int i = 0; i < 10000; ++i) {
    logged += limiter.Allow("caller-" + std::to_string(i), t0, &left_out);
  }
  EXPECT_EQ(logged, 11);  // ten tracked keys and one shared budget
  // Once their period is over, idle keys make room for new ones.
  EXPECT_TRUE(limiter.Allow("newcomer", t0 + absl::Minutes(2), &left_out));
  EXPECT_TRUE(limiter.Allow("another", t0 + absl::Minutes(2), &left_out));
}

}  // namespace
}  // namespace rl
