// What MetricStore refuses: batches ValidateBatch finds bad and options
// out of range (metric_store_validation.cc), and batches past the limits a
// write keeps (metric_store.cc): series per run, runs, new runs per source
// or per caller, the dropped-points series at the series limit. Helpers:
// metric_store_test_util.h.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "telemetry/metric_store.h"
#include "telemetry/metric_store_test_util.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

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

// ---------------------------------------------------------------------------
// Limits

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

}  // namespace
}  // namespace rl
