// What MetricStore lets go (metric_store_retention.cc): a series' oldest
// chunks past max_points_per_series, runs past their retention, and
// emitter streams idle past stream_retention (also those of a store from
// before streams had write times). Helpers: metric_store_test_util.h.
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "telemetry/metric_store.h"
#include "telemetry/metric_store_test_util.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

TEST(MetricStoreTest, MaxPointsPerSeriesTrimsOldestChunks) {
  MetricStoreOptions options;
  options.max_points_per_series = 3000;
  const std::string path = DbPath("trim");
  auto store = OpenStore(path, options);
  ASSERT_NE(store, nullptr);
  int64_t step = 0;
  for (int w = 1; w <= 20; ++w) {
    std::vector<MetricPoint> points;
    for (int i = 0; i < 700; ++i, ++step) {
      points.push_back(Point("x", step, step));
    }
    points.push_back(Point("small", w, w));
    ASSERT_OK(WriteOne(store.get(), Batch("run-1", w, points)));
    const std::vector<SeriesInfo> infos = store->ListSeries("run-1", "x");
    ASSERT_EQ(infos.size(), 1u);
    EXPECT_LE(infos[0].num_points(), 3000) << "after write " << w;
    EXPECT_EQ(infos[0].last_step(), step - 1);
  }
  const std::vector<SeriesInfo> infos = store->ListSeries("run-1", "x");
  const int64_t kept = infos[0].num_points();
  EXPECT_LE(kept, 3000);
  EXPECT_GE(kept, 3000 - MetricStore::kChunkPoints);
  const QueryResponse r = MustQuery(store.get(), Raw("run-1", {"x"}));
  ASSERT_EQ(r.series_size(), 1);
  const Series& s = r.series(0);
  ASSERT_EQ(s.points_size(), kept);
  // The newest points, contiguous up to the last step.
  for (int i = 0; i < s.points_size(); ++i) {
    ASSERT_EQ(s.points(i).step(), step - kept + i);
  }
  // The untrimmed series is intact.
  EXPECT_EQ(
      MustQuery(store.get(), Raw("run-1", {"small"})).series(0).points_size(),
      20);
  // The counts survive a reopen.
  store.reset();
  store = OpenStore(path, options);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->ListSeries("run-1", "x")[0].num_points(), kept);
  int64_t stored = 0;
  for (int64_t n : ChunkCounts(path, "run-1", "x")) stored += n;
  EXPECT_EQ(stored, kept);
}

TEST(MetricStoreTest, RetentionDeletesOldRuns) {
  MetricStoreOptions options;
  options.run_retention = absl::Hours(1);
  auto store = OpenStore(DbPath("retention"), options);
  ASSERT_NE(store, nullptr);
  const absl::Time now = absl::Now();
  const int64_t old_ns = absl::ToUnixNanos(now - absl::Hours(2));
  const int64_t fresh_ns = absl::ToUnixNanos(now - absl::Minutes(5));
  ASSERT_OK(WriteOne(
      store.get(),
      Batch("old", 1, {Point("x", 1, 1, old_ns), Point("y", 1, 1, old_ns)},
            "a")));
  // One recent point keeps a run.
  ASSERT_OK(WriteOne(
      store.get(),
      Batch("fresh", 1, {Point("x", 1, 1, old_ns), Point("y", 1, 1, fresh_ns)},
            "b")));
  absl::StatusOr<int> deleted = store->ApplyRetention(now);
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 1);
  const std::vector<RunSummary> runs = store->ListRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, "fresh");
  EXPECT_THAT(store->Query(Raw("old")), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(store->ListSeries("old", "").empty());
  EXPECT_EQ(MustQuery(store.get(), Raw("fresh")).series_size(), 2);
  deleted = store->ApplyRetention(now);
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 0);

  // No retention configured: nothing is deleted.
  auto keep = OpenStore(DbPath("no_retention"));
  ASSERT_NE(keep, nullptr);
  ASSERT_OK(WriteOne(keep.get(), Batch("old", 1, {Point("x", 1, 1, old_ns)})));
  deleted = keep->ApplyRetention(now + absl::Hours(1000));
  ASSERT_OK(deleted);
  EXPECT_EQ(*deleted, 0);
  EXPECT_EQ(keep->ListRuns().size(), 1u);
}

TEST(MetricStoreTest, IdleEmitterStreamsAreForgotten) {
  // Every emitter process is a new stream (source, incarnation); before,
  // the store kept each one's sequence numbers for ever.
  const std::string path = DbPath("idle_streams");
  MetricStoreOptions options;
  options.stream_retention = absl::Hours(24);
  auto store = OpenStore(path, options);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK(WriteOne(store.get(),
                       Batch("run", 1, {Point("x", i, 1)}, "actor/0", i + 1)));
  }
  // A gap, kept as a stored row: batch 3 of stream 51 stored, 1 and 2 not.
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run", 3, {Point("x", 99, 1)}, "actor/0", 51)));
  EXPECT_EQ(store->num_streams(), 51);
  const absl::Time now = absl::Now();
  absl::StatusOr<int> forgotten = store->ForgetIdleStreams(now);
  ASSERT_OK(forgotten);
  EXPECT_EQ(*forgotten, 0);  // all written just now
  forgotten = store->ForgetIdleStreams(now + absl::Hours(25));
  ASSERT_OK(forgotten);
  EXPECT_EQ(*forgotten, 51);
  EXPECT_EQ(store->num_streams(), 0);
  // The points stay; and the rows are gone, not only the memory.
  EXPECT_EQ(MustQuery(store.get(), Raw("run")).series(0).points_size(), 51);
  store.reset();
  store = OpenStore(path, options);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->num_streams(), 0);
  // A forgotten stream that speaks again is stored, and known again.
  bool duplicate = true;
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run", 2, {Point("x", 100, 1)}, "actor/0", 50),
                     &duplicate));
  EXPECT_FALSE(duplicate);
  EXPECT_EQ(store->num_streams(), 1);
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run", 2, {Point("x", 100, 1)}, "actor/0", 50),
                     &duplicate));
  EXPECT_TRUE(duplicate);
}

TEST(MetricStoreTest, AStoreWithoutStreamWriteTimesOrRunsIsUpgraded) {
  const std::string path = DbPath("old_streams");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE streams (source TEXT NOT NULL, "
                         "incarnation INTEGER NOT NULL, last_sequence INTEGER "
                         "NOT NULL, PRIMARY KEY (source, incarnation)); "
                         "INSERT INTO streams VALUES ('learner/0', 1, 7); "
                         "CREATE TABLE stream_gaps (source TEXT NOT NULL, "
                         "incarnation INTEGER NOT NULL, first_sequence "
                         "INTEGER NOT NULL, last_sequence INTEGER NOT NULL, "
                         "PRIMARY KEY (source, incarnation, first_sequence)); "
                         "INSERT INTO stream_gaps VALUES ('learner/0', 1, 3, "
                         "4);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->num_streams(), 1);
  bool duplicate = false;
  ASSERT_OK(
      WriteOne(store.get(), Batch("run", 7, {Point("x", 1, 1)}), &duplicate));
  EXPECT_TRUE(duplicate);  // what the old store knew still holds
  ASSERT_OK(
      WriteOne(store.get(), Batch("run", 3, {Point("x", 3, 1)}), &duplicate));
  EXPECT_FALSE(duplicate);  // its gap too: batch 3 was never stored
  ASSERT_OK(
      WriteOne(store.get(), Batch("run", 5, {Point("x", 5, 1)}), &duplicate));
  EXPECT_TRUE(duplicate);
  // Its streams have no write time: the first retention forgets them.
  absl::StatusOr<int> forgotten = store->ForgetIdleStreams(absl::Now());
  ASSERT_OK(forgotten);
  EXPECT_EQ(*forgotten, 1);
}

}  // namespace
}  // namespace rl
