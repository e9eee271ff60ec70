#include "coordinator/queue_wait.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "telemetry/client/emitter.h"
#include "telemetry/client/recording_transport.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::SizeIs;

Run MakeRun(const std::string& id, RunState state, absl::Time created) {
  Run run;
  run.set_run_id(id);
  run.set_state(state);
  const int64_t ns = absl::ToUnixNanos(created);
  run.mutable_create_time()->set_seconds(ns / 1000000000);
  run.mutable_create_time()->set_nanos(static_cast<int32_t>(ns % 1000000000));
  return run;
}

// One point per run, stored under that run (not the coordinator's own run,
// where one series per run would pile up), whatever run the emitter is set
// to.
TEST(QueueWaitReporterTest, OnePointPerRunStoredWithTheRun) {
  auto sent = std::make_shared<SentPoints>();
  Emitter emitter(std::make_unique<RecordingTransport>(sent));
  emitter.SetRun("system");
  QueueWaitReporter reporter(&emitter);
  const absl::Time created = absl::FromUnixSeconds(1700000000);
  const absl::Time started = created + absl::Milliseconds(2500);

  reporter.Observe(MakeRun("run-7", QUEUED, created), created);
  reporter.Observe(MakeRun("run-7", RUNNING, created), started);
  // Running again (a restarted gang) and another run's start.
  reporter.Observe(MakeRun("run-7", RUNNING, created),
                   started + absl::Seconds(30));
  reporter.Observe(MakeRun("run-8", RUNNING, created),
                   created + absl::Seconds(4));
  emitter.Emit("coordinator/other", 1, 1);  // still the emitter's run
  ASSERT_OK(emitter.Flush(absl::Seconds(60)));

  absl::MutexLock lock(&sent->mu);
  ASSERT_THAT(sent->points, SizeIs(3));
  const MetricPoint& first = sent->points[0];
  EXPECT_EQ(first.name(), "coordinator/queue_wait_seconds");
  EXPECT_EQ(sent->runs[0], "run-7");
  EXPECT_THAT(first.labels(), SizeIs(0));
  EXPECT_DOUBLE_EQ(first.value(), 2.5);
  EXPECT_EQ(first.step(), absl::ToUnixMillis(started));
  EXPECT_EQ(sent->runs[1], "run-8");
  EXPECT_DOUBLE_EQ(sent->points[1].value(), 4);
  EXPECT_EQ(sent->runs[2], "system");
}

}  // namespace
}  // namespace rl
