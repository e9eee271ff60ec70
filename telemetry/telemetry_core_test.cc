// TelemetryCore without gRPC: the limits on what clients can make it hold.
// Event files stay bounded over many runs and lose no point; the ingest
// budget is shared by all streams; watchers are bounded and a watcher that
// cannot keep up is dropped; runs and series beyond the store's limits are
// refused; every refusal is counted.
#include "telemetry/telemetry_core.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "telemetry/tfevents/event.pb.h"
#include "telemetry/tfevents/tfrecord.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(60);

std::shared_ptr<MetricBatch> Batch(const std::string& run,
                                   const std::string& source, int64_t seq,
                                   int points, int64_t first_step = 0) {
  auto b = std::make_shared<MetricBatch>();
  b->set_run_id(run);
  b->set_source(source);
  b->set_incarnation(1);
  b->set_sequence_number(seq);
  for (int i = 0; i < points; ++i) {
    MetricPoint* p = b->add_points();
    p->set_name("m");
    p->set_step(first_step + i);
    p->set_wall_time_ns(1'700'000'000'000'000'000 + first_step + i);
    p->set_value(static_cast<double>(first_step + i));
  }
  return b;
}

// Submits and waits for the outcome.
absl::Status Store(TelemetryCore* core, std::shared_ptr<MetricBatch> batch) {
  absl::Notification stored;
  absl::Status outcome;
  absl::Status submitted = core->Submit(std::move(batch), [&](absl::Status s) {
    outcome = std::move(s);
    stored.Notify();
  });
  if (!submitted.ok()) return submitted;
  if (!stored.WaitForNotificationWithTimeout(kTimeout)) {
    return absl::DeadlineExceededError("not stored in time");
  }
  return outcome;
}

// This process's open files under `dir`. Only those: the store's writer
// thread opens and closes its journal while a test counts, so counting every
// descriptor would measure the store too.
int OpenFilesUnder(const std::string& dir) {
  const std::string prefix = fs::weakly_canonical(dir).string() + "/";
  int n = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd", error)) {
    const fs::path target = fs::read_symlink(entry.path(), error);
    if (error) continue;  // closed since the listing: not open any more
    if (target.string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

// Every event in the event files of `dir`, file by file in name order.
std::vector<tensorboard::Event> ReadEvents(const fs::path& dir) {
  std::vector<tensorboard::Event> events;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    auto records = DecodeTfRecords(bytes.str());
    EXPECT_OK(records);
    if (!records.ok()) continue;
    for (const std::string& record : *records) {
      EXPECT_TRUE(events.emplace_back().ParseFromString(record));
    }
  }
  return events;
}

// (step, value) of every scalar in the event files of `dir`.
std::vector<std::pair<int64_t, float>> ReadScalars(const fs::path& dir) {
  std::vector<std::pair<int64_t, float>> scalars;
  for (const tensorboard::Event& event : ReadEvents(dir)) {
    for (const auto& v : event.summary().value()) {
      scalars.emplace_back(event.step(), v.simple_value());
    }
  }
  return scalars;
}

// How many HParams sessions the event files of `dir` hold.
int HParamsSessions(const fs::path& dir) {
  int sessions = 0;
  for (const tensorboard::Event& event : ReadEvents(dir)) {
    for (const auto& v : event.summary().value()) {
      if (v.tag() == "_hparams_/session_start_info") ++sessions;
    }
  }
  return sessions;
}

// A run's HParams are written once, a restart of telemetry included: the
// sweep's view sends every trial's again after one, and they went into a
// second event file, a second session of the run in TensorBoard.
TEST(TelemetryCoreTest, ARunsHParamsAreWrittenOnceAcrossARestart) {
  const std::string dir = MakeTestDir();
  TelemetryCoreOptions options;
  options.store_path = dir + "/telemetry.db";
  options.tensorboard_dir = dir + "/tb";
  const fs::path run_dir = fs::path(options.tensorboard_dir) / "trial-1";
  std::map<std::string, google::protobuf::Value> hparams;
  hparams["ppo.learning_rate"].set_number_value(1e-3);
  for (int start = 1; start <= 2; ++start) {
    ASSERT_OK_AND_ASSIGN(auto core, TelemetryCore::Create(options));
    core->AddRunHParams("trial-1", hparams, "sweep-1/config-0");
    core->AddRunHParams("trial-1", hparams, "sweep-1/config-0");
    // A point after them: once it is written, so are they.
    ASSERT_OK(Store(core.get(), Batch("trial-1", "s", start, 1, start)));
    ASSERT_TRUE(WaitFor([&] { return core->stats().tensorboard_points == 1; },
                        kTimeout));
    core.reset();  // closes the event files
    EXPECT_EQ(HParamsSessions(run_dir), 1) << "after start " << start;
  }
}

TEST(TelemetryCoreTest, EventFilesStayBoundedOverManyRunsAndLoseNothing) {
  const std::string dir = MakeTestDir();
  TelemetryCoreOptions options;
  options.store_path = dir + "/telemetry.db";
  options.tensorboard_dir = dir + "/tb";
  options.max_open_event_files = 4;
  ASSERT_OK_AND_ASSIGN(auto core, TelemetryCore::Create(options));

  // One run's event file, open after its first batch.
  int64_t seq = 0;
  ASSERT_OK(Store(core.get(), Batch("warm-up", "s", ++seq, 1)));
  ASSERT_TRUE(
      WaitFor([&] { return core->stats().tensorboard_points == 1; }, kTimeout));
  EXPECT_EQ(OpenFilesUnder(options.tensorboard_dir), 1);  // warm-up's file

  constexpr int kRuns = 50;
  constexpr int kRounds = 3;
  constexpr int kPoints = 5;
  int64_t written = 1;
  for (int round = 0; round < kRounds; ++round) {
    for (int run = 0; run < kRuns; ++run) {
      ASSERT_OK(Store(core.get(), Batch(absl::StrCat("run-", run), "s", ++seq,
                                        kPoints, round * kPoints)));
      written += kPoints;
      EXPECT_LE(OpenFilesUnder(options.tensorboard_dir),
                options.max_open_event_files);
    }
    ASSERT_TRUE(WaitFor(
        [&] { return core->stats().tensorboard_points == written; }, kTimeout))
        << core->stats().tensorboard_points << " of " << written;
    EXPECT_LE(OpenFilesUnder(options.tensorboard_dir),
              options.max_open_event_files);
    EXPECT_LE(core->stats().open_event_files, options.max_open_event_files);
  }
  EXPECT_EQ(core->stats().tensorboard_errors, 0);
  core.reset();  // closes the event files

  std::vector<std::pair<int64_t, float>> want;
  for (int step = 0; step < kRounds * kPoints; ++step) {
    want.emplace_back(step, static_cast<float>(step));
  }
  for (int run = 0; run < kRuns; ++run) {
    EXPECT_EQ(ReadScalars(fs::path(dir) / "tb" / absl::StrCat("run-", run)),
              want)
        << "run-" << run;
  }
}

// The budget counts batches from every stream (source) until their outcome
// has been reported; a batch beyond it is refused, not queued.
TEST(TelemetryCoreTest, IngestBudgetIsSharedByAllStreams) {
  TelemetryCoreOptions options;
  options.store_path = MakeTestDir() + "/telemetry.db";
  options.max_ingest_batches = 3;
  const auto big = Batch("run", "source-0", 1, 200);
  options.max_ingest_bytes = static_cast<int64_t>(big->ByteSizeLong()) + 100;
  ASSERT_OK_AND_ASSIGN(auto core, TelemetryCore::Create(options));

  // A store that has not caught up: the first batch's acknowledgement
  // stalls the writer thread until released.
  absl::Notification entered, release, first_done;
  ASSERT_OK(core->Submit(big, [&](absl::Status) {
    entered.Notify();
    release.WaitForNotificationWithTimeout(kTimeout);
    first_done.Notify();
  }));
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(kTimeout));

  std::atomic<int> stored{0};
  auto count = [&](absl::Status s) {
    EXPECT_OK(s);
    ++stored;
  };
  // Bytes: a second batch as large as the first does not fit.
  EXPECT_THAT(core->Submit(Batch("run", "source-1", 1, 200), count),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("(max_ingest_bytes)")));
  // Batches: two small ones from two more streams fit, a fourth does not.
  ASSERT_OK(core->Submit(Batch("run", "source-2", 1, 1), count));
  ASSERT_OK(core->Submit(Batch("run", "source-3", 1, 1), count));
  EXPECT_THAT(core->Submit(Batch("run", "source-4", 1, 1), count),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("at most 3 (max_ingest_batches)")));
  TelemetryCoreStats stats = core->stats();
  EXPECT_EQ(stats.in_flight_batches, 3);
  EXPECT_EQ(stats.refused_ingest_budget, 2);

  release.Notify();
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(kTimeout));
  ASSERT_TRUE(WaitFor(
      [&] { return stored == 2 && core->stats().in_flight_batches == 0; },
      kTimeout));
  EXPECT_EQ(core->stats().in_flight_bytes, 0);
  // Room again: the refused batches go through when resent.
  EXPECT_OK(Store(core.get(), Batch("run", "source-1", 1, 200)));
  EXPECT_OK(Store(core.get(), Batch("run", "source-4", 1, 1)));
  EXPECT_EQ(core->stats().stored_batches, 5);
}

TEST(TelemetryCoreTest, WatchersAreBoundedAndOneThatStopsIsDropped) {
  TelemetryCoreOptions options;
  options.store_path = MakeTestDir() + "/telemetry.db";
  options.max_watchers = 2;
  ASSERT_OK_AND_ASSIGN(auto core, TelemetryCore::Create(options));
  WatchRequest request;
  request.set_run_id("run");
  std::atomic<int> full_calls{0}, keen_calls{0};
  ASSERT_OK(
      core->AddWatcher(request, [&](const std::string&, const MetricPoint&) {
        ++full_calls;
        return false;  // fell behind at its first point
      }));
  ASSERT_OK_AND_ASSIGN(
      const int64_t keen,
      core->AddWatcher(request, [&](const std::string&, const MetricPoint&) {
        ++keen_calls;
        return true;
      }));
  EXPECT_THAT(
      core->AddWatcher(
          request, [](const std::string&, const MetricPoint&) { return true; }),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("at most 2 (max_watchers)")));

  ASSERT_OK(Store(core.get(), Batch("run", "s", 1, 3)));
  EXPECT_EQ(full_calls, 1);
  EXPECT_EQ(keen_calls, 3);
  TelemetryCoreStats stats = core->stats();
  EXPECT_EQ(stats.watchers, 1);
  EXPECT_EQ(stats.refused_watchers, 1);
  EXPECT_EQ(stats.refused_watch_backlog, 1);

  // The dropped watcher's place is free again.
  ASSERT_OK(core->AddWatcher(
      request, [](const std::string&, const MetricPoint&) { return true; }));
  core->RemoveWatcher(keen);
  EXPECT_EQ(core->stats().watchers, 1);
}

TEST(TelemetryCoreTest, RunAndSeriesLimitsAreCountedRefusals) {
  TelemetryCoreOptions options;
  options.store_path = MakeTestDir() + "/telemetry.db";
  options.store.max_runs = 1;
  options.store.max_series_per_run = 1;
  ASSERT_OK_AND_ASSIGN(auto core, TelemetryCore::Create(options));
  ASSERT_OK(Store(core.get(), Batch("run-a", "s", 1, 2)));
  EXPECT_THAT(
      Store(core.get(), Batch("run-b", "s", 2, 1)),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("(max_runs)")));
  auto other_series = Batch("run-a", "s", 3, 1);
  other_series->mutable_points(0)->set_name("n");
  EXPECT_THAT(Store(core.get(), other_series),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("(max_series_per_run)")));
  const TelemetryCoreStats stats = core->stats();
  EXPECT_EQ(stats.refused_runs, 1);
  EXPECT_EQ(stats.refused_series_per_run, 1);
  EXPECT_EQ(stats.refused_batches, 2);
}

// One source may create only so many series (across runs); others are not
// held back by it, and a refused batch stores none of its points.
TEST(TelemetryCoreTest, SeriesPerSourceAreLimited) {
  TelemetryCoreOptions options;
  options.store_path = MakeTestDir() + "/telemetry.db";
  options.store.max_series_per_source = 2;
  ASSERT_OK_AND_ASSIGN(auto core, TelemetryCore::Create(options));
  ASSERT_OK(Store(core.get(), Batch("run-a", "noisy", 1, 1)));
  auto second = Batch("run-b", "noisy", 2, 1);
  ASSERT_OK(Store(core.get(), second));
  auto third = Batch("run-c", "noisy", 3, 1);
  EXPECT_THAT(Store(core.get(), third),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("source noisy would have created 3 series, "
                                 "at most 2 (max_series_per_source)")));
  // Points of series it already has are still taken.
  ASSERT_OK(Store(core.get(), Batch("run-a", "noisy", 4, 1)));
  ASSERT_OK(Store(core.get(), Batch("run-c", "quiet", 1, 1)));
  EXPECT_EQ(core->stats().refused_series_per_source, 1);
}

// A group whose write fails (UNAVAILABLE: the emitter resends), then a
// later batch of the same stream stored: the resent batch is stored, not
// taken for a duplicate and lost.
TEST(TelemetryCoreTest, ABatchWhoseWriteFailedIsStoredWhenResent) {
  TelemetryCoreOptions options;
  options.store_path = MakeTestDir() + "/telemetry.db";
  ASSERT_OK_AND_ASSIGN(auto core, TelemetryCore::Create(options));
  ASSERT_OK(Store(core.get(), Batch("run-a", "s", 1, 2, 0)));
  auto exec = [&](const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(options.store_path.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 60000);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  };
  exec(
      "CREATE TRIGGER fail_batch_2 BEFORE INSERT ON streams WHEN "
      "NEW.last_sequence = 2 BEGIN SELECT RAISE(ABORT, 'injected'); END;");
  EXPECT_THAT(Store(core.get(), Batch("run-a", "s", 2, 2, 2)),
              StatusIs(absl::StatusCode::kUnavailable));
  exec("DROP TRIGGER fail_batch_2;");
  ASSERT_OK(Store(core.get(), Batch("run-a", "s", 3, 2, 4)));
  ASSERT_OK(Store(core.get(), Batch("run-a", "s", 2, 2, 2)));  // the resend
  ASSERT_OK(Store(core.get(), Batch("run-a", "s", 3, 2, 4)));  // and its next
  const TelemetryCoreStats stats = core->stats();
  EXPECT_EQ(stats.stored_batches, 3);
  EXPECT_EQ(stats.duplicate_batches, 1);
  EXPECT_EQ(stats.refused_batches, 1);
  QueryRequest query;
  query.set_run_id("run-a");
  ASSERT_OK_AND_ASSIGN(const QueryResponse response, core->Query(query));
  ASSERT_EQ(response.series_size(), 1);
  std::vector<int64_t> steps;
  for (const MetricPoint& p : response.series(0).points()) {
    steps.push_back(p.step());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(TelemetryCoreTest, BadLimitsAreRefused) {
  TelemetryCoreOptions options;
  options.store_path = MakeTestDir() + "/telemetry.db";
  options.tensorboard_dir = MakeTestDir("tb");
  options.max_open_event_files = 0;
  EXPECT_THAT(TelemetryCore::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_open_event_files")));
  options.max_open_event_files = 1;
  options.max_ingest_batches = 0;
  EXPECT_THAT(TelemetryCore::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_ingest_batches")));
}

}  // namespace
}  // namespace rl
