#include "telemetry/watch_backlog.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// Steps 1..127: one varint byte, so every point has the same size.
MetricPoint Point(int64_t step) {
  MetricPoint p;
  p.set_name("learner/loss");
  p.set_step(step);
  p.set_value(0.5);
  return p;
}

TEST(WatchBacklogTest, KeepsOrderAndCountsBytes) {
  WatchBacklog backlog(1 << 20);
  for (int step = 1; step <= 3; ++step) ASSERT_OK(backlog.Push(Point(step)));
  EXPECT_EQ(backlog.size(), 3u);
  EXPECT_EQ(backlog.bytes(), 3 * WatchBacklog::PointBytes(Point(1)));
  MetricPoint out;
  for (int step = 1; step <= 3; ++step) {
    ASSERT_TRUE(backlog.Pop(&out));
    EXPECT_EQ(out.step(), step);
  }
  EXPECT_FALSE(backlog.Pop(&out));
  EXPECT_EQ(backlog.bytes(), 0);
}

// A reader that keeps up never hits the bound however many points pass.
TEST(WatchBacklogTest, AReaderThatKeepsUpIsNeverEnded) {
  const int64_t point = WatchBacklog::PointBytes(Point(1));
  WatchBacklog backlog(2 * point);
  MetricPoint out;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_OK(backlog.Push(Point(1 + i % 100)));
    ASSERT_TRUE(backlog.Pop(&out));
  }
}

// The backlog of a client that does not read is bounded: past the bound
// it is emptied and the watch is over, with the bound named.
TEST(WatchBacklogTest, FallingBehindEmptiesItAndEndsTheWatch) {
  const int64_t point = WatchBacklog::PointBytes(Point(1));
  WatchBacklog backlog(10 * point);
  for (int step = 1; step <= 10; ++step) ASSERT_OK(backlog.Push(Point(step)));
  EXPECT_THAT(backlog.Push(Point(11)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr(absl::StrCat("watcher fell behind by ",
                                              11 * point, " bytes"))));
  EXPECT_EQ(backlog.bytes(), 0);
  EXPECT_EQ(backlog.size(), 0u);
  MetricPoint out;
  EXPECT_FALSE(backlog.Pop(&out));
  EXPECT_THAT(backlog.Push(Point(12)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("max_watch_backlog_bytes")));
  EXPECT_EQ(backlog.size(), 0u);
}

}  // namespace
}  // namespace rl
