// MetricStore's reads (metric_store_query.cc): raw and downsampled
// queries, series merged over labels, name filters, step and wall-time
// ranges, bad queries, NaN and infinite values through buckets, and the
// lists of series and runs. Helpers: metric_store_test_util.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "telemetry/metric_store.h"
#include "telemetry/metric_store_test_util.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------------------
// Queries

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
