#include "telemetry/metric_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string DbPath(const std::string& name) {
  return MakeTestDir(name) + "/telemetry.db";
}

std::unique_ptr<MetricStore> OpenStore(const std::string& path,
                                       MetricStoreOptions options = {}) {
  absl::StatusOr<std::unique_ptr<MetricStore>> store =
      MetricStore::Open(path, options);
  EXPECT_OK(store);
  return store.ok() ? std::move(*store) : nullptr;
}

MetricPoint Point(const std::string& name, int64_t step, double value,
                  int64_t wall_ns = 0,
                  const std::map<std::string, std::string>& labels = {}) {
  MetricPoint p;
  p.set_name(name);
  p.set_step(step);
  p.set_value(value);
  p.set_wall_time_ns(wall_ns == 0 ? 1000 + step : wall_ns);
  for (const auto& [k, v] : labels) (*p.mutable_labels())[k] = v;
  return p;
}

MetricBatch Batch(const std::string& run, int64_t seq,
                  std::vector<MetricPoint> points,
                  const std::string& source = "learner/0",
                  int64_t incarnation = 1) {
  MetricBatch b;
  b.set_run_id(run);
  b.set_sequence_number(seq);
  b.set_source(source);
  b.set_incarnation(incarnation);
  for (MetricPoint& p : points) *b.add_points() = std::move(p);
  return b;
}

// Writes one batch; returns its result, `duplicate` set if given.
absl::Status WriteOne(MetricStore* store, const MetricBatch& batch,
                      bool* duplicate = nullptr) {
  std::vector<absl::Status> results;
  std::vector<bool> dup;
  absl::Status st = store->Write({&batch}, &results, &dup);
  if (!st.ok()) return st;
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(dup.size(), 1u);
  if (duplicate != nullptr) *duplicate = dup[0];
  return results[0];
}

QueryRequest Raw(const std::string& run,
                 const std::vector<std::string>& names = {}) {
  QueryRequest q;
  q.set_run_id(run);
  for (const std::string& n : names) q.add_names(n);
  return q;
}

QueryResponse MustQuery(MetricStore* store, const QueryRequest& q) {
  absl::StatusOr<QueryResponse> r = store->Query(q);
  EXPECT_OK(r);
  return r.ok() ? *r : QueryResponse();
}

std::vector<int64_t> Steps(const Series& s) {
  std::vector<int64_t> out;
  for (const MetricPoint& p : s.points()) out.push_back(p.step());
  return out;
}

// Chunk sizes of one series as stored, oldest first.
std::vector<int64_t> ChunkCounts(const std::string& path,
                                 const std::string& run,
                                 const std::string& name) {
  std::vector<int64_t> out;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(
                db,
                "SELECT c.count FROM chunks c JOIN series s ON c.series_id = "
                "s.id WHERE s.run_id = ? AND s.name = ? ORDER BY c.id;",
                -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(st, 1, run.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, name.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st) == SQLITE_ROW) {
    out.push_back(sqlite3_column_int64(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// ---------------------------------------------------------------------------
// Validation

void ExpectInvalid(const MetricBatch& b, const std::string& field) {
  EXPECT_THAT(ValidateBatch(b),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)));
}

TEST(ValidateBatchTest, NamesTheBadField) {
  const MetricBatch good =
      Batch("run-1", 1, {Point("a", 1, 1.0), Point("b", 2, 2.0)});
  EXPECT_OK(ValidateBatch(good));

  MetricBatch b = good;
  b.set_run_id("");
  ExpectInvalid(b, "batch.run_id");
  b = good;
  b.set_run_id(std::string(129, 'r'));
  ExpectInvalid(b, "batch.run_id");
  b = good;
  b.set_source("");
  ExpectInvalid(b, "batch.source");
  b = good;
  b.set_sequence_number(0);
  ExpectInvalid(b, "batch.sequence_number");
  b = good;
  b.set_sequence_number(-3);
  ExpectInvalid(b, "batch.sequence_number");
  b = good;
  b.set_dropped_points(-1);
  ExpectInvalid(b, "batch.dropped_points");
  b = good;
  b.mutable_points(1)->set_name("");
  ExpectInvalid(b, "batch.points[1].name");
  b = good;
  b.mutable_points(1)->set_name(std::string(257, 'n'));
  ExpectInvalid(b, "batch.points[1].name");
  b = good;
  b.mutable_points(0)->set_name("loss\nx");
  ExpectInvalid(b, "batch.points[0].name");
  EXPECT_THAT(ValidateBatch(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("control")));
  b = good;
  b.mutable_points(0)->set_name(std::string("a\x7f", 2));
  ExpectInvalid(b, "batch.points[0].name");

  b = good;
  for (int i = 0; i < kMaxLabels; ++i) {
    (*b.mutable_points(0)->mutable_labels())[absl::StrCat("k", i)] = "v";
  }
  EXPECT_OK(ValidateBatch(b));
  (*b.mutable_points(0)->mutable_labels())["k16"] = "v";
  ExpectInvalid(b, "batch.points[0].labels");
  EXPECT_THAT(ValidateBatch(b),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("17")));

  b = good;
  (*b.mutable_points(1)->mutable_labels())["actor"] = "3\t";
  ExpectInvalid(b, "batch.points[1].labels");
  b = good;
  (*b.mutable_points(0)->mutable_labels())[std::string(65, 'k')] = "v";
  ExpectInvalid(b, "batch.points[0].labels");
  b = good;
  (*b.mutable_points(0)->mutable_labels())["empty"] = "";
  EXPECT_OK(ValidateBatch(b));
}

TEST(ValidateBatchTest, TooManyPoints) {
  MetricBatch b = Batch("run-1", 1, {});
  for (int i = 0; i <= kMaxPointsPerBatch; ++i)
    *b.add_points() = Point("a", i, 0);
  ExpectInvalid(b, "batch.points");
  b.mutable_points()->RemoveLast();
  EXPECT_OK(ValidateBatch(b));
}

// ---------------------------------------------------------------------------
// Writes and queries

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

// Series "return" {actor=0, env=x}: steps 0..9 value s; {actor=1, env=x}:
// steps 0..9 value s + 10; {actor=2, env=y}: step 0 value 100.
std::unique_ptr<MetricStore> AggregationStore(const std::string& path) {
  auto store = OpenStore(path);
  std::vector<MetricPoint> points;
  for (int s = 0; s < 10; ++s) {
    points.push_back(Point("return", s, s, 0, {{"actor", "0"}, {"env", "x"}}));
    points.push_back(
        Point("return", s, s + 10, 0, {{"actor", "1"}, {"env", "x"}}));
  }
  points.push_back(Point("return", 0, 100, 0, {{"actor", "2"}, {"env", "y"}}));
  EXPECT_OK(WriteOne(store.get(), Batch("run-1", 1, points)));
  return store;
}

TEST(MetricStoreTest, AggregateLabelsMeanRaw) {
  auto store = AggregationStore(DbPath("agg_raw"));
  ASSERT_NE(store, nullptr);
  QueryRequest q = Raw("run-1");
  q.add_aggregate_labels("actor");
  q.set_aggregation(AGGREGATE_MEAN);
  const QueryResponse r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 2);  // env=x and env=y
  std::map<std::string, const Series*> by_env;
  for (const Series& s : r.series()) {
    EXPECT_EQ(s.labels().count("actor"), 0u);
    ASSERT_EQ(s.labels().count("env"), 1u);
    by_env[s.labels().at("env")] = &s;
  }
  ASSERT_EQ(by_env.count("x"), 1u);
  const Series& x = *by_env["x"];
  ASSERT_EQ(x.points_size(), 10);
  for (int s = 0; s < 10; ++s) {
    EXPECT_EQ(x.points(s).step(), s);
    EXPECT_DOUBLE_EQ(x.points(s).value(), s + 5.0);  // (s + s + 10) / 2
  }
  ASSERT_EQ(by_env.count("y"), 1u);
  ASSERT_EQ(by_env["y"]->points_size(), 1);
  EXPECT_DOUBLE_EQ(by_env["y"]->points(0).value(), 100.0);

  // Merging across env too leaves one series.
  q.add_aggregate_labels("env");
  q.set_aggregation(AGGREGATE_SUM);
  const QueryResponse all = MustQuery(store.get(), q);
  ASSERT_EQ(all.series_size(), 1);
  EXPECT_TRUE(all.series(0).labels().empty());
  ASSERT_EQ(all.series(0).points_size(), 10);
  EXPECT_DOUBLE_EQ(all.series(0).points(0).value(), 0 + 10 + 100.0);
  EXPECT_DOUBLE_EQ(all.series(0).points(9).value(), 9 + 19.0);
}

TEST(MetricStoreTest, AggregateLabelsMeanBuckets) {
  auto store = AggregationStore(DbPath("agg_buckets"));
  ASSERT_NE(store, nullptr);
  QueryRequest q = Raw("run-1");
  q.add_aggregate_labels("actor");
  q.set_aggregation(AGGREGATE_MEAN);
  q.set_max_buckets(2);
  const QueryResponse r = MustQuery(store.get(), q);
  const Series* x = nullptr;
  for (const Series& s : r.series()) {
    EXPECT_EQ(s.points_size(), 0);
    if (s.labels().at("env") == "x") x = &s;
  }
  ASSERT_NE(x, nullptr);
  ASSERT_EQ(x->buckets_size(), 2);  // steps [0, 4] and [5, 9]
  const Bucket& b0 = x->buckets(0);
  EXPECT_EQ(b0.min_step(), 0);
  EXPECT_EQ(b0.max_step(), 4);
  EXPECT_EQ(b0.count(), 10);
  EXPECT_DOUBLE_EQ(b0.min(), 0);
  EXPECT_DOUBLE_EQ(b0.max(), 14);
  EXPECT_DOUBLE_EQ(b0.mean(), 7);  // (0+..+4 + 10+..+14) / 10
  EXPECT_DOUBLE_EQ(b0.last(), 9);  // (4 + 14) / 2
  const Bucket& b1 = x->buckets(1);
  EXPECT_EQ(b1.min_step(), 5);
  EXPECT_EQ(b1.max_step(), 9);
  EXPECT_EQ(b1.count(), 10);
  EXPECT_DOUBLE_EQ(b1.min(), 5);
  EXPECT_DOUBLE_EQ(b1.max(), 19);
  EXPECT_DOUBLE_EQ(b1.mean(), 12);
  EXPECT_DOUBLE_EQ(b1.last(), 14);
}

TEST(MetricStoreTest, NameFilters) {
  auto store = OpenStore(DbPath("names"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(WriteOne(
      store.get(),
      Batch("run-1", 1,
            {Point("learner/loss", 1, 1), Point("learner/entropy", 1, 2),
             Point("actor/return", 1, 3), Point("learnerx", 1, 4)})));
  auto names = [&](const QueryRequest& q) {
    std::vector<std::string> out;
    const QueryResponse r = MustQuery(store.get(), q);
    for (const Series& s : r.series()) {
      out.push_back(s.name());
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  QueryRequest q = Raw("run-1");
  EXPECT_EQ(names(q).size(), 4u);
  q.set_name_prefix("learner/");
  EXPECT_EQ(names(q),
            (std::vector<std::string>{"learner/entropy", "learner/loss"}));
  q = Raw("run-1", {"actor/return", "learnerx"});
  EXPECT_EQ(names(q), (std::vector<std::string>{"actor/return", "learnerx"}));
  // Exact names win over the prefix.
  q = Raw("run-1", {"actor/return"});
  q.set_name_prefix("learner/");
  EXPECT_EQ(names(q), (std::vector<std::string>{"actor/return"}));
  EXPECT_TRUE(names(Raw("run-1", {"nothing"})).empty());
  q = Raw("run-1");
  q.set_name_prefix("zzz");
  EXPECT_TRUE(names(q).empty());
}

TEST(MetricStoreTest, StepAndWallTimeRanges) {
  auto store = OpenStore(DbPath("ranges"));
  ASSERT_NE(store, nullptr);
  // 3000 points, so several chunks; wall time 1000000 + 10 * step.
  std::vector<MetricPoint> points;
  for (int s = 0; s < 3000; ++s) {
    points.push_back(Point("x", s, s, 1000000 + 10 * s));
  }
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 1, points)));

  QueryRequest q = Raw("run-1");
  q.set_min_step(1500);
  q.set_max_step(1519);
  QueryResponse r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  std::vector<int64_t> expected;
  for (int s = 1500; s <= 1519; ++s) expected.push_back(s);
  EXPECT_EQ(Steps(r.series(0)), expected);

  q = Raw("run-1");
  q.set_min_step(2990);  // max_step 0: no upper bound
  r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  EXPECT_EQ(r.series(0).points_size(), 10);
  EXPECT_EQ(r.series(0).points(0).step(), 2990);

  q = Raw("run-1");
  q.set_min_wall_time_ns(1000000 + 10 * 500);
  q.set_max_wall_time_ns(1000000 + 10 * 509);
  r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  expected.clear();
  for (int s = 500; s <= 509; ++s) expected.push_back(s);
  EXPECT_EQ(Steps(r.series(0)), expected);

  // Both: the intersection.
  q.set_min_step(505);
  q.set_max_step(2000);
  r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  EXPECT_EQ(Steps(r.series(0)),
            (std::vector<int64_t>{505, 506, 507, 508, 509}));

  // Buckets over a step range.
  q = Raw("run-1");
  q.set_min_step(1000);
  q.set_max_step(1999);
  q.set_max_buckets(10);
  r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  ASSERT_EQ(r.series(0).buckets_size(), 10);
  for (int k = 0; k < 10; ++k) {
    const Bucket& b = r.series(0).buckets(k);
    EXPECT_EQ(b.count(), 100);
    EXPECT_EQ(b.min_step(), 1000 + 100 * k);
    EXPECT_EQ(b.max_step(), 1099 + 100 * k);
    EXPECT_DOUBLE_EQ(b.last(), 1099 + 100 * k);
  }
}

TEST(MetricStoreTest, DownsamplesToMaxBuckets) {
  MetricStoreOptions options;
  options.max_raw_points = 50000;
  auto store = OpenStore(DbPath("downsample"), options);
  ASSERT_NE(store, nullptr);
  std::vector<MetricPoint> points;
  for (int s = 0; s < 100000; ++s) points.push_back(Point("x", s, s % 1000));
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 1, points)));

  QueryRequest q = Raw("run-1");
  q.set_max_buckets(100);
  const QueryResponse r = MustQuery(store.get(), q);
  ASSERT_EQ(r.series_size(), 1);
  const Series& s = r.series(0);
  EXPECT_EQ(s.points_size(), 0);
  ASSERT_EQ(s.buckets_size(), 100);
  int64_t total = 0;
  for (int k = 0; k < 100; ++k) {
    const Bucket& b = s.buckets(k);
    total += b.count();
    EXPECT_EQ(b.count(), 1000);
    EXPECT_EQ(b.min_step(), 1000 * k);
    EXPECT_EQ(b.max_step(), 1000 * k + 999);
    EXPECT_DOUBLE_EQ(b.min(), 0);
    EXPECT_DOUBLE_EQ(b.max(), 999);
    EXPECT_DOUBLE_EQ(b.mean(), 499.5);
    EXPECT_DOUBLE_EQ(b.last(), 999);
  }
  EXPECT_EQ(total, 100000);

  // The raw query is too large for max_raw_points; a narrower one is not.
  EXPECT_THAT(store->Query(Raw("run-1")),
              StatusIs(absl::StatusCode::kResourceExhausted));
  q = Raw("run-1");
  q.set_max_step(49999);
  const absl::StatusOr<QueryResponse> narrow = store->Query(q);
  ASSERT_OK(narrow);
  EXPECT_EQ(narrow->series(0).points_size(), 50000);
}

TEST(MetricStoreTest, QueryErrors) {
  auto store = OpenStore(DbPath("errors"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(WriteOne(store.get(), Batch("run-1", 1, {Point("x", 1, 1)})));
  EXPECT_THAT(store->Query(Raw("run-2")),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store->Query(Raw("")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  QueryRequest q = Raw("run-1");
  q.set_max_buckets(-1);
  EXPECT_THAT(store->Query(q), StatusIs(absl::StatusCode::kInvalidArgument));
  q = Raw("run-1");
  q.set_min_step(10);
  q.set_max_step(5);
  EXPECT_THAT(store->Query(q), StatusIs(absl::StatusCode::kInvalidArgument));
  q = Raw("run-1");
  q.set_min_step(5);
  q.set_max_step(5);
  EXPECT_OK(store->Query(q));
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

TEST(MetricStoreTest, TooManySeriesRefusesOnlyThatBatch) {
  MetricStoreOptions options;
  options.max_series_per_run = 3;
  auto store = OpenStore(DbPath("series_limit"), options);
  ASSERT_NE(store, nullptr);
  const MetricBatch a =
      Batch("run-1", 1, {Point("x", 1, 1), Point("y", 1, 1)}, "a");
  const MetricBatch b =  // two new series: 4 > 3
      Batch("run-1", 1, {Point("z", 1, 1), Point("w", 1, 1)}, "b");
  const MetricBatch c =  // existing series only
      Batch("run-1", 1, {Point("x", 2, 2), Point("y", 2, 2)}, "c");
  const MetricBatch d =  // another run has its own limit
      Batch("run-2", 1, {Point("z", 1, 1), Point("w", 1, 1)}, "d");
  std::vector<absl::Status> results;
  std::vector<bool> dups;
  ASSERT_OK(store->Write({&a, &b, &c, &d}, &results, &dups));
  ASSERT_EQ(results.size(), 4u);
  EXPECT_OK(results[0]);
  EXPECT_THAT(results[1],
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("at most 3 (max_series_per_run)")));
  EXPECT_OK(results[2]);
  EXPECT_OK(results[3]);
  EXPECT_EQ(dups, (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(store->stats().refused_series_per_run, 1);

  std::vector<std::string> names;
  for (const SeriesInfo& info : store->ListSeries("run-1", "")) {
    names.push_back(info.name());
    EXPECT_EQ(info.num_points(), 2);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(Steps(MustQuery(store.get(), Raw("run-1", {"x"})).series(0)),
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(store->ListSeries("run-2", "").size(), 2u);

  // The refused batch was not recorded as stored: a resend is refused again
  // rather than called a duplicate, and a batch that fits is stored.
  bool dup = true;
  EXPECT_THAT(WriteOne(store.get(), b, &dup),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(dup);
  const MetricBatch one_new = Batch("run-1", 2, {Point("z", 1, 1)}, "b");
  EXPECT_OK(WriteOne(store.get(), one_new));
  EXPECT_EQ(store->ListSeries("run-1", "").size(), 3u);
}

// Runs are bounded like series: a batch that would add a run beyond
// max_runs is refused (also within one group write), existing runs keep
// taking points, and a run deleted makes room for another.
TEST(MetricStoreTest, TooManyRunsRefusesOnlyNewRuns) {
  MetricStoreOptions options;
  options.max_runs = 3;
  auto store = OpenStore(DbPath("run_limit"), options);
  ASSERT_NE(store, nullptr);
  const MetricBatch r1 = Batch("run-1", 1, {Point("x", 1, 1)}, "a");
  const MetricBatch r2 = Batch("run-2", 1, {Point("x", 1, 1)}, "b");
  ASSERT_OK(WriteOne(store.get(), r1));
  const MetricBatch r3 = Batch("run-3", 1, {Point("x", 1, 1)}, "c");
  const MetricBatch r4 = Batch("run-4", 1, {Point("x", 1, 1)}, "d");
  const MetricBatch old = Batch("run-1", 2, {Point("y", 2, 2)}, "a");
  std::vector<absl::Status> results;
  std::vector<bool> dups;
  ASSERT_OK(store->Write({&r2, &r3, &r4, &old}, &results, &dups));
  ASSERT_EQ(results.size(), 4u);
  EXPECT_OK(results[0]);
  EXPECT_OK(results[1]);
  EXPECT_THAT(results[2], StatusIs(absl::StatusCode::kFailedPrecondition,
                                   HasSubstr("at most 3 (max_runs)")));
  EXPECT_OK(results[3]);
  EXPECT_EQ(store->ListRuns().size(), 3u);
  EXPECT_THAT(store->Query(Raw("run-4")),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(store->stats().refused_runs, 1);

  // Not recorded as stored: refused again, then stored once there is room.
  EXPECT_THAT(WriteOne(store.get(), r4),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(store->stats().refused_runs, 2);
  ASSERT_OK(store->DeleteRun("run-2"));
  bool dup = true;
  EXPECT_OK(WriteOne(store.get(), r4, &dup));
  EXPECT_FALSE(dup);
  EXPECT_EQ(MustQuery(store.get(), Raw("run-4")).series_size(), 1);
}

// One source cannot make runs faster than its budget (a token bucket of
// max_new_runs_per_source_per_minute): beyond it, batches that would create
// a run are refused and counted; its existing runs and other sources go
// on.
TEST(MetricStoreTest, NewRunsPerSourceAreRateLimited) {
  MetricStoreOptions options;
  options.max_new_runs_per_source_per_minute = 5;
  auto store = OpenStore(DbPath("runs_per_source"), options);
  ASSERT_NE(store, nullptr);
  int64_t seq = 0;
  int refused = 0;
  for (int r = 0; r < 50; ++r) {
    const absl::Status s =
        WriteOne(store.get(), Batch(absl::StrCat("flood-", r), ++seq,
                                    {Point("x", 1, 1)}, "worker/evil"));
    if (!s.ok()) {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition,
                              HasSubstr("max_new_runs_per_source_per_minute")));
      ++refused;
    }
  }
  // Five at once (a minute's budget), perhaps one more refilled meanwhile.
  EXPECT_GE(refused, 44);
  EXPECT_LE(store->ListRuns().size(), 6u);
  EXPECT_EQ(store->stats().refused_runs_per_source, refused);
  // Its existing runs still take points; another source still makes runs.
  EXPECT_OK(WriteOne(
      store.get(), Batch("flood-0", ++seq, {Point("y", 2, 2)}, "worker/evil")));
  EXPECT_OK(WriteOne(store.get(),
                     Batch("other-run", 1, {Point("x", 1, 1)}, "learner/0")));
}

// Issue 46: a client that names a new source with every batch still draws
// new runs from its caller's budget (MetricBatch.caller, stamped by the
// service from its token); other callers go on.
TEST(MetricStoreTest, NewRunsPerCallerAreRateLimitedWhateverTheSource) {
  MetricStoreOptions options;
  options.max_new_runs_per_source_per_minute = 5;
  auto store = OpenStore(DbPath("runs_per_caller"), options);
  ASSERT_NE(store, nullptr);
  int refused = 0;
  for (int r = 0; r < 50; ++r) {
    MetricBatch b = Batch(absl::StrCat("flood-", r), 1, {Point("x", 1, 1)},
                          absl::StrCat("worker/evil-", r));
    b.set_caller("token:mallory");
    const absl::Status s = WriteOne(store.get(), b);
    if (!s.ok()) {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition,
                              HasSubstr("caller token:mallory creates new "
                                        "runs faster than 5")));
      ++refused;
    }
  }
  EXPECT_GE(refused, 44);
  EXPECT_LE(store->ListRuns().size(), 6u);
  MetricBatch other = Batch("real-run", 1, {Point("x", 1, 1)}, "learner/0");
  other.set_caller("token:local-worker");
  EXPECT_OK(WriteOne(store.get(), other));
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

// A source that has dropped points carries its running total in every
// batch. At the run's series limit its dropped-points series cannot be
// created; its points still go in (the total is left out), not the batch
// refused, and with it every batch after, each carrying a total above 0.
TEST(MetricStoreTest, AtTheSeriesLimitDroppedPointsDoNotRefuseTheBatch) {
  MetricStoreOptions options;
  options.max_series_per_run = 2;
  auto store = OpenStore(DbPath("dropped_at_limit"), options);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(WriteOne(
      store.get(),
      Batch("run-1", 1, {Point("x", 1, 1), Point("y", 1, 1)}, "learner/0")));
  MetricBatch b = Batch("run-1", 2, {Point("x", 2, 2)}, "learner/0");
  b.set_dropped_points(5);
  EXPECT_OK(WriteOne(store.get(), b));
  // A new series of its own is still refused, and counted once.
  MetricBatch c = Batch("run-1", 3, {Point("z", 3, 3)}, "learner/0");
  c.set_dropped_points(6);
  EXPECT_THAT(WriteOne(store.get(), c),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("max_series_per_run")));
  EXPECT_EQ(store->stats().refused_series_per_run, 1);
  EXPECT_EQ(store->ListSeries("run-1", "x")[0].num_points(), 2);
  EXPECT_EQ(store->ListSeries("run-1", "").size(), 2u);
  EXPECT_EQ(MustQuery(store.get(), Raw("run-1", {kDroppedPointsSeries}))
                .series_size(),
            0);
}

// The store lets points go a chunk (1024) at a time: a limit of 100 kept
// a series at 1024 points, then at 1; a negative retention or max_runs 0
// were taken. Each is refused when the store opens, naming it.
TEST(MetricStoreTest, OptionsOutOfRangeAreRefusedNamingEach) {
  for (int64_t bad : {int64_t{-1}, int64_t{100}, int64_t{1023}}) {
    MetricStoreOptions options;
    options.max_points_per_series = bad;
    EXPECT_THAT(MetricStore::Open(DbPath("bad_points"), options),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("max_points_per_series ", bad,
                                                ": 0 (keep all) or at least "
                                                "1024"))));
  }
  MetricStoreOptions options;
  options.run_retention = absl::Hours(-24);
  options.max_runs = 0;
  EXPECT_THAT(MetricStore::Open(DbPath("bad_limits"), options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("retention_days"),
                             HasSubstr("max_runs 0: at least 1"))));
  options = {};
  options.max_points_per_series = 1024;
  EXPECT_OK(MetricStore::Open(DbPath("points_ok"), options).status());
}

TEST(MetricStoreTest, NonFiniteValuesRoundTrip) {
  auto store = OpenStore(DbPath("nonfinite"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(WriteOne(
      store.get(),
      Batch("run-1", 1,
            {Point("x", 1, 1.0), Point("x", 2, kNaN), Point("x", 3, kInf),
             Point("x", 4, -kInf), Point("x", 5, 3.0), Point("x", 6, kNaN)})));
  const QueryResponse r = MustQuery(store.get(), Raw("run-1"));
  ASSERT_EQ(r.series_size(), 1);
  const Series& s = r.series(0);
  ASSERT_EQ(s.points_size(), 6);
  EXPECT_EQ(s.points(0).value(), 1.0);
  EXPECT_TRUE(std::isnan(s.points(1).value()));
  EXPECT_EQ(s.points(2).value(), kInf);
  EXPECT_EQ(s.points(3).value(), -kInf);
  EXPECT_EQ(s.points(4).value(), 3.0);
  EXPECT_TRUE(std::isnan(s.points(5).value()));

  QueryRequest q = Raw("run-1");
  q.set_max_buckets(1);
  const QueryResponse b = MustQuery(store.get(), q);
  ASSERT_EQ(b.series_size(), 1);
  ASSERT_EQ(b.series(0).buckets_size(), 1);
  const Bucket& bucket = b.series(0).buckets(0);
  EXPECT_EQ(bucket.count(), 6);
  EXPECT_DOUBLE_EQ(bucket.min(), 1.0);
  EXPECT_DOUBLE_EQ(bucket.max(), 3.0);
  EXPECT_DOUBLE_EQ(bucket.mean(), 2.0);
  EXPECT_TRUE(std::isnan(bucket.last()));
}

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

TEST(MetricStoreTest, ListSeriesAndRuns) {
  auto store = OpenStore(DbPath("list"));
  ASSERT_NE(store, nullptr);
  ASSERT_OK(WriteOne(
      store.get(),
      Batch("run-a", 1,
            {Point("learner/loss", 1, 1, 100), Point("learner/loss", 7, 1, 700),
             Point("learner/loss", 3, 1, 300),
             Point("actor/return", 2, 1, 200, {{"actor", "0"}}),
             Point("actor/return", 4, 1, 400, {{"actor", "1"}})})));
  ASSERT_OK(WriteOne(store.get(),
                     Batch("run-b", 2, {Point("learner/loss", 10, 1, 50)})));
  EXPECT_EQ(store->ListSeries("", "").size(), 4u);
  EXPECT_EQ(store->ListSeries("run-a", "").size(), 3u);
  EXPECT_EQ(store->ListSeries("run-b", "").size(), 1u);
  EXPECT_EQ(store->ListSeries("", "learner/").size(), 2u);
  EXPECT_EQ(store->ListSeries("run-a", "actor/").size(), 2u);
  EXPECT_TRUE(store->ListSeries("run-c", "").empty());
  for (const SeriesInfo& info : store->ListSeries("run-a", "learner/")) {
    EXPECT_EQ(info.run_id(), "run-a");
    EXPECT_EQ(info.name(), "learner/loss");
    EXPECT_EQ(info.num_points(), 3);
    EXPECT_EQ(info.last_step(), 7);
    EXPECT_TRUE(info.labels().empty());
  }
  std::map<std::string, std::string> actors;
  for (const SeriesInfo& info : store->ListSeries("run-a", "actor/")) {
    EXPECT_EQ(info.num_points(), 1);
    actors[info.labels().at("actor")] = info.name();
  }
  EXPECT_EQ(actors.size(), 2u);

  std::map<std::string, RunSummary> runs;
  for (const RunSummary& r : store->ListRuns()) runs[r.run_id] = r;
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs["run-a"].num_series, 3);
  EXPECT_EQ(runs["run-a"].num_points, 5);
  EXPECT_EQ(runs["run-a"].last_step, 7);
  EXPECT_EQ(runs["run-a"].last_wall_time_ns, 700);
  EXPECT_EQ(runs["run-b"].num_series, 1);
  EXPECT_EQ(runs["run-b"].num_points, 1);
  EXPECT_EQ(runs["run-b"].last_step, 10);
  EXPECT_EQ(runs["run-b"].last_wall_time_ns, 50);

  ASSERT_OK(store->DeleteRun("run-a"));
  EXPECT_EQ(store->ListRuns().size(), 1u);
  EXPECT_EQ(store->ListSeries("", "").size(), 1u);
}

}  // namespace
}  // namespace rl
