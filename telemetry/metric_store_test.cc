// MetricStore's writes (metric_store.cc): points stored in step order,
// series told apart by their labels, resent and duplicate batches of an
// emitter stream (also after a failed write and a reopen), chunks appended
// to across reopens, re-emitted steps replacing the stored points, and an
// emitter's dropped points as a series. Queries are metric_store_query_test.cc,
// what the store lets go metric_store_retention_test.cc, what it refuses
// metric_store_limits_test.cc; their helpers metric_store_test_util.h.
#include "telemetry/metric_store.h"

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "telemetry/metric_store_test_util.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Writes

TEST(MetricStoreTest, WriteThenQueryRawInStepOrder) {
  auto store = OpenStore(DbPath("raw"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 1,
                                        {Point("loss", 5, 0.5, 5005),
                                         Point("loss", 1, 0.1, 5001),
                                         Point("loss", 3, 0.3, 5003)})));
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 2,
                                        {Point("loss", 2, 0.2, 5002),
                                         Point("loss", 4, 0.4, 5004)})));
  const QueryResponse r = MustQuery(store.get(), Raw("run-1"));
  ASSERT_EQ(r.series_size(), 1);
  const Series& s = r.series(0);
  EXPECT_EQ(s.name(), "loss");
  EXPECT_TRUE(s.labels().empty());
  EXPECT_EQ(s.buckets_size(), 0);
  ASSERT_EQ(s.points_size(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(s.points(i).step(), i + 1);
    EXPECT_EQ(s.points(i).wall_time_ns(), 5001 + i);
    EXPECT_DOUBLE_EQ(s.points(i).value(), 0.1 * (i + 1));
  }
}

TEST(MetricStoreTest, LabelsMakeDistinctSeries) {
  auto store = OpenStore(DbPath("labels"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(WriteOne(
      store.get(),
      Batch("run-1", 1,
            {Point("return", 1, 10, 0, {{"actor", "0"}}),
             Point("return", 1, 20, 0, {{"actor", "1"}}),
             Point("return", 2, 11, 0, {{"actor", "0"}}),
             Point("return", 1, 30, 0, {}),
             Point("return", 1, 40, 0, {{"actor", "0"}, {"env", "x"}})})));
  const QueryResponse r = MustQuery(store.get(), Raw("run-1"));
  ASSERT_EQ(r.series_size(), 4);
  std::map<std::string, std::vector<double>> by_labels;
  for (const Series& s : r.series()) {
    EXPECT_EQ(s.name(), "return");
    std::map<std::string, std::string> labels(s.labels().begin(),
                                              s.labels().end());
    std::string key;
    for (const auto& [k, v] : labels) absl::StrAppend(&key, k, "=", v, ";");
    for (const MetricPoint& p : s.points()) by_labels[key].push_back(p.value());
  }
  EXPECT_EQ(by_labels["actor=0;"], (std::vector<double>{10, 11}));
  EXPECT_EQ(by_labels["actor=1;"], (std::vector<double>{20}));
  EXPECT_EQ(by_labels[""], (std::vector<double>{30}));
  EXPECT_EQ(by_labels["actor=0;env=x;"], (std::vector<double>{40}));
  EXPECT_EQ(store->ListSeries("run-1", "").size(), 4u);
}

TEST(MetricStoreTest, DuplicateBatchesAreStoredOnce) {
  auto store = OpenStore(DbPath("dedup"));
  ASSERT_NE(store, nullptr);
  const MetricBatch b1 =
      Batch("run-1", 1, {Point("x", 1, 1), Point("x", 2, 2)}, "actor/0", 7);
  bool dup = true;
  ASSERT_OK(WriteOne(store.get(), b1, &dup));
  EXPECT_FALSE(dup);
  ASSERT_OK(WriteOne(store.get(), b1, &dup));
  EXPECT_TRUE(dup);
  EXPECT_EQ(MustQuery(store.get(), Raw("run-1")).series(0).points_size(), 2);

  // An older sequence number of the stream is a duplicate too; in one Write
  // the second copy of a batch is.
  const MetricBatch b2 = Batch("run-1", 2, {Point("x", 3, 3)}, "actor/0", 7);
  std::vector<absl::Status> results;
  std::vector<bool> dups;
  ASSERT_OK(store->Write({&b2, &b2, &b1}, &results, &dups));
  ASSERT_EQ(results.size(), 3u);
  for (const absl::Status& st : results) EXPECT_OK(st);
  EXPECT_EQ(dups, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(MustQuery(store.get(), Raw("run-1")).series(0).points_size(), 3);

  // Same sequence number, another incarnation (a restarted process) or
  // another source: stored.
  const MetricBatch other_incarnation =
      Batch("run-1", 1, {Point("x", 10, 10)}, "actor/0", 8);
  ASSERT_OK(WriteOne(store.get(), other_incarnation, &dup));
  EXPECT_FALSE(dup);
  const MetricBatch other_source =
      Batch("run-1", 1, {Point("x", 11, 11)}, "actor/1", 7);
  ASSERT_OK(WriteOne(store.get(), other_source, &dup));
  EXPECT_FALSE(dup);
  EXPECT_EQ(Steps(MustQuery(store.get(), Raw("run-1")).series(0)),
            (std::vector<int64_t>{1, 2, 3, 10, 11}));
}

// A process that reuses its source and incarnation for a second run numbers
// that run's batches from 1 again: they are stored, not taken for resends of
// the first run's (they were acknowledged and dropped).
TEST(MetricStoreTest, AStreamIsKeyedByItsRunToo) {
  const std::string path = DbPath("stream_runs");
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  bool dup = true;
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run-1", 1, {Point("x", 1, 1)}, "learner/0", 7),
                     &dup));
  EXPECT_FALSE(dup);
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run-2", 1, {Point("x", 1, 5)}, "learner/0", 7),
                     &dup));
  EXPECT_FALSE(dup);
  EXPECT_EQ(MustQuery(store.get(), Raw("run-2")).series_size(), 1);
  // Each run's stream still knows its resends, across a reopen.
  store.reset();
  store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  for (const char* run : {"run-1", "run-2"}) {
    ASSERT_OK(WriteOne(
        store.get(), Batch(run, 1, {Point("x", 1, 9)}, "learner/0", 7), &dup));
    EXPECT_TRUE(dup) << run;
  }
  EXPECT_EQ(store->num_streams(), 2);
}

// Runs `sql` on its own connection to the store's file (as another process
// would).
void ExecOnTheSide(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 60000);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error != nullptr ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

// The write of batch 2 fails (as on a busy or failing disk); batch 3 is then
// stored. The emitter resends from batch 2 on: 2 must be stored, not taken
// for a duplicate because a later batch of its stream is.
TEST(MetricStoreTest, ABatchResentAfterItsWriteFailedIsStoredAfterALaterOne) {
  const std::string path = DbPath("failed_write");
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  const MetricBatch b1 = Batch("run-1", 1, {Point("x", 1, 1)}, "actor/0", 7);
  const MetricBatch b2 = Batch("run-1", 2, {Point("x", 2, 2)}, "actor/0", 7);
  const MetricBatch b3 = Batch("run-1", 3, {Point("x", 3, 3)}, "actor/0", 7);
  bool dup = true;
  ASSERT_OK(WriteOne(store.get(), b1, &dup));
  ExecOnTheSide(path,
                "CREATE TRIGGER fail_batch_2 BEFORE INSERT ON streams WHEN "
                "NEW.last_sequence = 2 BEGIN SELECT RAISE(ABORT, 'injected "
                "write failure'); END;");
  std::vector<absl::Status> results;
  std::vector<bool> dups;
  EXPECT_THAT(store->Write({&b2}, &results, &dups),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("injected write failure")));
  ExecOnTheSide(path, "DROP TRIGGER fail_batch_2;");
  ASSERT_OK(WriteOne(store.get(), b3, &dup));
  EXPECT_FALSE(dup);
  ASSERT_OK(WriteOne(store.get(), b2, &dup));
  EXPECT_FALSE(dup);
  EXPECT_EQ(Steps(MustQuery(store.get(), Raw("run-1")).series(0)),
            (std::vector<int64_t>{1, 2, 3}));
  // Now every one of them is a duplicate, also after a reopen.
  for (const MetricBatch* b : {&b1, &b2, &b3}) {
    ASSERT_OK(WriteOne(store.get(), *b, &dup));
    EXPECT_TRUE(dup) << b->sequence_number();
  }
  store.reset();
  store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Write({&b3, &b2, &b1}, &results, &dups));
  EXPECT_EQ(dups, (std::vector<bool>{true, true, true}));

  // A batch missing when the store closed is still stored after a reopen;
  // the one after it, within one write, too.
  const MetricBatch b4 = Batch("run-1", 4, {Point("x", 4, 4)}, "actor/0", 7);
  const MetricBatch b5 = Batch("run-1", 5, {Point("x", 5, 5)}, "actor/0", 7);
  const MetricBatch b6 = Batch("run-1", 6, {Point("x", 6, 6)}, "actor/0", 7);
  ASSERT_OK(WriteOne(store.get(), b6, &dup));
  store.reset();
  store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Write({&b4, &b6, &b5, &b4}, &results, &dups));
  EXPECT_EQ(dups, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(Steps(MustQuery(store.get(), Raw("run-1")).series(0)),
            (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

// What a stream keeps of the batches it misses is bounded: past 64 gaps the
// oldest is forgotten (its batch is then taken for a duplicate, as a
// high-water mark would), the newest are still filled.
TEST(MetricStoreTest, MissingBatchesKeptPerStreamAreBounded) {
  const std::string path = DbPath("gaps_bounded");
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  bool dup = true;
  for (int64_t seq = 1; seq <= 201; seq += 2) {  // 2, 4, ..., 200 missing
    ASSERT_OK(WriteOne(
        store.get(), Batch("run-1", seq, {Point("x", seq, 1)}, "a", 1), &dup));
    ASSERT_FALSE(dup);
  }
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run-1", 200, {Point("x", 200, 1)}, "a", 1), &dup));
  EXPECT_FALSE(dup);
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 2, {Point("x", 2, 1)}, "a", 1),
                     &dup));
  EXPECT_TRUE(dup);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM stream_gaps;", -1, &st,
                               nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(st, 0), 63);  // 64, one filled since
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(MetricStoreTest, DurableAcrossReopen) {
  const std::string path = DbPath("durable");
  const MetricBatch b1 = Batch(
      "run-1", 1,
      {Point("loss", 1, 0.5, 777), Point("ret", 1, 9, 0, {{"actor", "2"}})},
      "learner/0", 3);
  {
    auto store = OpenStore(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(WriteOne(store.get(), b1));
  }
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  QueryResponse r = MustQuery(store.get(), Raw("run-1", {"loss"}));
  ASSERT_EQ(r.series_size(), 1);
  ASSERT_EQ(r.series(0).points_size(), 1);
  EXPECT_EQ(r.series(0).points(0).wall_time_ns(), 777);
  EXPECT_DOUBLE_EQ(r.series(0).points(0).value(), 0.5);
  r = MustQuery(store.get(), Raw("run-1", {"ret"}));
  ASSERT_EQ(r.series_size(), 1);
  EXPECT_EQ(r.series(0).labels().at("actor"), "2");
  const std::vector<SeriesInfo> infos = store->ListSeries("run-1", "");
  ASSERT_EQ(infos.size(), 2u);
  for (const SeriesInfo& info : infos) {
    EXPECT_EQ(info.num_points(), 1);
    EXPECT_EQ(info.last_step(), 1);
  }
  // The dedup state survived.
  bool dup = false;
  ASSERT_OK(WriteOne(store.get(), b1, &dup));
  EXPECT_TRUE(dup);
  EXPECT_EQ(
      MustQuery(store.get(), Raw("run-1", {"loss"})).series(0).points_size(),
      1);
  const MetricBatch b2 =
      Batch("run-1", 2, {Point("loss", 2, 0.25)}, "learner/0", 3);
  ASSERT_OK(WriteOne(store.get(), b2, &dup));
  EXPECT_FALSE(dup);
  EXPECT_EQ(
      MustQuery(store.get(), Raw("run-1", {"loss"})).series(0).points_size(),
      2);
}

TEST(MetricStoreTest, AppendsContinueIntoTheOpenChunkAfterReopen) {
  const std::string path = DbPath("append");
  for (int w = 0; w < 3; ++w) {
    auto store = OpenStore(path);
    ASSERT_NE(store, nullptr);
    std::vector<MetricPoint> points;
    for (int s = 500 * w; s < 500 * (w + 1); ++s) {
      points.push_back(Point("x", s, s * 2.0));
    }
    ASSERT_OK(WriteOne(store.get(), Batch("run-1", w + 1, points)));
  }
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  const QueryResponse r = MustQuery(store.get(), Raw("run-1"));
  ASSERT_EQ(r.series_size(), 1);
  const Series& s = r.series(0);
  ASSERT_EQ(s.points_size(), 1500);
  for (int i = 0; i < 1500; ++i) {
    ASSERT_EQ(s.points(i).step(), i);
    ASSERT_DOUBLE_EQ(s.points(i).value(), i * 2.0);
    ASSERT_EQ(s.points(i).wall_time_ns(), 1000 + i);
  }
  const std::vector<SeriesInfo> infos = store->ListSeries("run-1", "x");
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].num_points(), 1500);
  EXPECT_EQ(infos[0].last_step(), 1499);
  // Chunks were filled, not one per write.
  EXPECT_EQ(ChunkCounts(path, "run-1", "x"),
            (std::vector<int64_t>{MetricStore::kChunkPoints,
                                  1500 - MetricStore::kChunkPoints}));

  // Buckets over the whole series see every point.
  QueryRequest q = Raw("run-1");
  q.set_max_buckets(3);
  const QueryResponse buckets = MustQuery(store.get(), q);
  ASSERT_EQ(buckets.series_size(), 1);
  int64_t total = 0;
  for (const Bucket& b : buckets.series(0).buckets()) total += b.count();
  EXPECT_EQ(total, 1500);
}

// ---------------------------------------------------------------------------
// Re-emitted steps: a learner that resumes from an earlier checkpoint emits
// those steps again; the later batch's points replace the stored ones.

std::vector<std::pair<int64_t, double>> StepValues(MetricStore* store,
                                                   const std::string& name) {
  std::vector<std::pair<int64_t, double>> out;
  const QueryResponse r = MustQuery(store, Raw("run-1", {name}));
  EXPECT_EQ(r.series_size(), 1);
  for (const Series& s : r.series()) {
    for (const MetricPoint& p : s.points())
      out.push_back({p.step(), p.value()});
  }
  return out;
}

int64_t StoredPoints(const std::string& path, const std::string& name) {
  int64_t n = 0;
  for (int64_t c : ChunkCounts(path, "run-1", name)) n += c;
  return n;
}

TEST(MetricStoreTest, ReemittedStepsReplaceTheStoredPoints) {
  const std::string path = DbPath("reemit");
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  std::vector<MetricPoint> first, again;
  for (int s = 1; s <= 5; ++s) first.push_back(Point("x", s, s));
  for (int s = 3; s <= 7; ++s) again.push_back(Point("x", s, 100 + s));
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 1, first, "learner/0", 1)));
  // The resumed learner is a new incarnation of the same source.
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 1, again, "learner/0", 2)));

  const std::vector<std::pair<int64_t, double>> expected = {
      {1, 1}, {2, 2}, {3, 103}, {4, 104}, {5, 105}, {6, 106}, {7, 107}};
  EXPECT_EQ(StepValues(store.get(), "x"), expected);
  const std::vector<SeriesInfo> infos = store->ListSeries("run-1", "x");
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].num_points(), 7);
  EXPECT_EQ(infos[0].last_step(), 7);
  ASSERT_EQ(store->ListRuns().size(), 1u);
  EXPECT_EQ(store->ListRuns()[0].num_points, 7);

  // Downsampled: one bucket over everything, then one bucket per step.
  QueryRequest q = Raw("run-1", {"x"});
  q.set_max_buckets(1);
  QueryResponse r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  ASSERT_EQ(r.series(0).buckets_size(), 1);
  const Bucket& all = r.series(0).buckets(0);
  EXPECT_EQ(all.count(), 7);
  EXPECT_DOUBLE_EQ(all.min(), 1);
  EXPECT_DOUBLE_EQ(all.max(), 107);
  EXPECT_DOUBLE_EQ(all.mean(), (1 + 2 + 103 + 104 + 105 + 106 + 107) / 7.0);
  EXPECT_DOUBLE_EQ(all.last(), 107);
  q.set_max_buckets(7);
  r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  ASSERT_EQ(r.series(0).buckets_size(), 7);
  for (int k = 0; k < 7; ++k) {
    const Bucket& b = r.series(0).buckets(k);
    EXPECT_EQ(b.count(), 1) << "step " << k + 1;
    EXPECT_EQ(b.min_step(), expected[k].first);
    EXPECT_DOUBLE_EQ(b.mean(), expected[k].second);
    EXPECT_DOUBLE_EQ(b.last(), expected[k].second);
  }

  // Replaced, not hidden: the store holds 7 points, also after a reopen,
  // and appends continue.
  EXPECT_EQ(StoredPoints(path, "x"), 7);
  store.reset();
  store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(StepValues(store.get(), "x"), expected);
  EXPECT_EQ(store->ListSeries("run-1", "x")[0].num_points(), 7);
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run-1", 2, {Point("x", 7, 207), Point("x", 8, 8)},
                           "learner/0", 2)));
  std::vector<std::pair<int64_t, double>> more = expected;
  more.back().second = 207;
  more.push_back({8, 8});
  EXPECT_EQ(StepValues(store.get(), "x"), more);
  EXPECT_EQ(store->ListSeries("run-1", "x")[0].num_points(), 8);
  EXPECT_EQ(StoredPoints(path, "x"), 8);
}

// A resume to a step in an older chunk, and two batches of one group write
// covering the same steps: the latest batch wins everywhere.
TEST(MetricStoreTest, ReemittedStepsReplaceAcrossChunksAndWithinOneWrite) {
  const std::string path = DbPath("reemit_chunks");
  auto store = OpenStore(path);
  ASSERT_NE(store, nullptr);
  std::vector<MetricPoint> points;
  for (int s = 0; s < 3000; ++s) points.push_back(Point("x", s, s));
  points.push_back(Point("other", 5, 5));
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 1, points)));
  ASSERT_EQ(ChunkCounts(path, "run-1", "x").size(), 3u);

  std::vector<MetricPoint> resumed, again;
  for (int s = 1000; s < 2000; ++s) resumed.push_back(Point("x", s, 10000 + s));
  for (int s = 1500; s < 1600; ++s) again.push_back(Point("x", s, 20000 + s));
  const MetricBatch b2 = Batch("run-1", 2, resumed);
  const MetricBatch b3 = Batch("run-1", 3, again);
  std::vector<absl::Status> results;
  std::vector<bool> dups;
  ASSERT_OK(store->Write({&b2, &b3}, &results, &dups));
  for (const absl::Status& st : results) EXPECT_OK(st);

  const std::vector<std::pair<int64_t, double>> got =
      StepValues(store.get(), "x");
  ASSERT_EQ(got.size(), 3000u);
  for (int s = 0; s < 3000; ++s) {
    const double want = s >= 1500 && s < 1600   ? 20000 + s
                        : s >= 1000 && s < 2000 ? 10000 + s
                                                : s;
    ASSERT_EQ(got[s].first, s);
    ASSERT_DOUBLE_EQ(got[s].second, want) << "step " << s;
  }
  EXPECT_EQ(store->ListSeries("run-1", "x")[0].num_points(), 3000);
  EXPECT_EQ(StoredPoints(path, "x"), 3000);
  EXPECT_EQ(StepValues(store.get(), "other"),
            (std::vector<std::pair<int64_t, double>>{{5, 5}}));

  QueryRequest q = Raw("run-1", {"x"});
  q.set_max_buckets(3);
  const QueryResponse r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  int64_t total = 0;
  for (const Bucket& b : r.series(0).buckets()) total += b.count();
  EXPECT_EQ(total, 3000);
}

// Points one batch carries at one step (the episode returns of one actor
// segment) are all kept; a later batch at that step replaces them together.
TEST(MetricStoreTest, PointsOfOneStepInOneBatchAreKeptTogether) {
  auto store = OpenStore(DbPath("one_step"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run-1", 1,
                           {Point("return", 10, 1), Point("return", 10, 2),
                            Point("return", 10, 3), Point("return", 20, 4)})));
  EXPECT_EQ(StepValues(store.get(), "return"),
            (std::vector<std::pair<int64_t, double>>{
                {10, 1}, {10, 2}, {10, 3}, {20, 4}}));
  ASSERT_OK(WriteOne(
      store.get(),
      Batch("run-1", 2, {Point("return", 10, 7), Point("return", 10, 8)})));
  EXPECT_EQ(
      StepValues(store.get(), "return"),
      (std::vector<std::pair<int64_t, double>>{{10, 7}, {10, 8}, {20, 4}}));
  EXPECT_EQ(store->ListSeries("run-1", "return")[0].num_points(), 3);
}
TEST(MetricStoreTest, DroppedPointsBecomeASeries) {
  auto store = OpenStore(DbPath("dropped"));
  ASSERT_NE(store, nullptr);
  MetricBatch b = Batch("run-1", 5, {Point("x", 1, 1, 4242)}, "actor/3");
  b.set_dropped_points(17);
  ASSERT_OK(WriteOne(store.get(), b));
  MetricBatch none = Batch("run-1", 6, {Point("x", 2, 2)}, "actor/3");
  ASSERT_OK(WriteOne(store.get(), none));  // dropped_points 0

  const QueryResponse r =
      MustQuery(store.get(), Raw("run-1", {kDroppedPointsSeries}));
  ASSERT_EQ(r.series_size(), 1);
  const Series& s = r.series(0);
  EXPECT_EQ(s.name(), "telemetry/dropped_points");
  ASSERT_EQ(s.labels().size(), 1u);
  EXPECT_EQ(s.labels().at("source"), "actor/3");
  ASSERT_EQ(s.points_size(), 1);
  EXPECT_DOUBLE_EQ(s.points(0).value(), 17);
  EXPECT_EQ(s.points(0).wall_time_ns(), 4242);
  EXPECT_EQ(store->ListSeries("run-1", "").size(), 2u);
}

}  // namespace
}  // namespace rl
