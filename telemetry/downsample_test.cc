#include "telemetry/downsample.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(BucketAccumulatorTest, MillionPointsIntoThousandBuckets) {
  BucketAccumulator acc(0, 999999, 1000);
  // Shuffled order: the buckets must not depend on arrival order.
  std::vector<int64_t> steps(1000000);
  std::iota(steps.begin(), steps.end(), 0);
  std::mt19937_64 rng(7);
  std::shuffle(steps.begin(), steps.end(), rng);
  for (int64_t s : steps) {
    acc.Add({s, s * 10, static_cast<double>(s) * 0.5});
  }
  const std::vector<Bucket> buckets = acc.Buckets();
  ASSERT_EQ(buckets.size(), 1000u);
  for (int k = 0; k < 1000; ++k) {
    const Bucket& b = buckets[k];
    const int64_t lo = int64_t{k} * 1000;
    const int64_t hi = lo + 999;
    SCOPED_TRACE(k);
    EXPECT_EQ(b.count(), 1000);
    EXPECT_EQ(b.min_step(), lo);
    EXPECT_EQ(b.max_step(), hi);
    EXPECT_DOUBLE_EQ(b.min(), lo * 0.5);
    EXPECT_DOUBLE_EQ(b.max(), hi * 0.5);
    EXPECT_DOUBLE_EQ(b.mean(), (lo + hi) / 2.0 * 0.5);
    EXPECT_DOUBLE_EQ(b.last(), hi * 0.5);
  }
}

TEST(BucketAccumulatorTest, EmptyBucketsOmittedAndOutOfRangeIgnored) {
  BucketAccumulator acc(0, 99, 10);
  acc.Add({5, 0, 1.0});
  acc.Add({95, 0, 2.0});
  acc.Add({-1, 0, 100.0});   // below the range
  acc.Add({100, 0, 100.0});  // above the range
  const std::vector<Bucket> buckets = acc.Buckets();
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].min_step(), 5);
  EXPECT_EQ(buckets[0].count(), 1);
  EXPECT_DOUBLE_EQ(buckets[0].mean(), 1.0);
  EXPECT_EQ(buckets[1].min_step(), 95);
  EXPECT_EQ(buckets[1].count(), 1);
  EXPECT_DOUBLE_EQ(buckets[1].max(), 2.0);

  BucketAccumulator none(0, 99, 10);
  EXPECT_TRUE(none.Buckets().empty());
}

TEST(BucketAccumulatorTest, NeverMoreBucketsThanAsked) {
  for (int n : {1, 2, 3, 7, 10, 100, 1000}) {
    for (int64_t hi : {0, 1, 9, 99, 100, 101, 12345}) {
      BucketAccumulator acc(0, hi, n);
      for (int64_t s = 0; s <= hi; ++s) acc.Add({s, 0, 1.0});
      const std::vector<Bucket> buckets = acc.Buckets();
      EXPECT_LE(buckets.size(), static_cast<size_t>(n)) << n << " " << hi;
      int64_t total = 0;
      for (const Bucket& b : buckets) total += b.count();
      EXPECT_EQ(total, hi + 1) << n << " " << hi;
    }
  }
}

// A query over the whole int64 range (a client's extreme min_step and
// max_step) divided by zero with one bucket (SIGFPE: the server died) and
// overflowed a signed step difference with more.
TEST(BucketAccumulatorTest, TheWholeStepRangeFitsItsBuckets) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int n : {1, 2, 3, 1000}) {
    BucketAccumulator acc(kMin, kMax, n);
    for (int64_t s :
         {kMin, kMin + 1, int64_t{-1}, int64_t{0}, kMax - 1, kMax}) {
      acc.Add({s, 0, 1.0});
    }
    const std::vector<Bucket> buckets = acc.Buckets();
    EXPECT_LE(buckets.size(), static_cast<size_t>(n)) << n;
    int64_t total = 0;
    for (const Bucket& b : buckets) total += b.count();
    EXPECT_EQ(total, 6) << n;
    EXPECT_EQ(buckets.front().min_step(), kMin) << n;
    EXPECT_EQ(buckets.back().max_step(), kMax) << n;
  }
}

TEST(BucketAccumulatorTest, LastIsValueAtLargestStepWhateverTheOrder) {
  BucketAccumulator acc(0, 9, 1);
  acc.Add({9, 0, 90.0});
  acc.Add({3, 0, 30.0});
  acc.Add({7, 0, 70.0});
  std::vector<Bucket> buckets = acc.Buckets();
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_DOUBLE_EQ(buckets[0].last(), 90.0);
  EXPECT_EQ(buckets[0].min_step(), 3);
  EXPECT_EQ(buckets[0].max_step(), 9);
  EXPECT_DOUBLE_EQ(buckets[0].min(), 30.0);
  EXPECT_DOUBLE_EQ(buckets[0].max(), 90.0);
  EXPECT_DOUBLE_EQ(buckets[0].mean(), 190.0 / 3);
}

TEST(BucketAccumulatorTest, NonFiniteValues) {
  BucketAccumulator acc(0, 19, 2);  // buckets [0, 9] and [10, 19]
  // Bucket 0: finite and non-finite values; the largest step holds a NaN.
  acc.Add({0, 0, 1.0});
  acc.Add({1, 0, kInf});
  acc.Add({2, 0, 3.0});
  acc.Add({3, 0, -kInf});
  acc.Add({4, 0, kNaN});
  // Bucket 1: nothing finite.
  acc.Add({10, 0, kNaN});
  acc.Add({11, 0, kInf});
  const std::vector<Bucket> buckets = acc.Buckets();
  ASSERT_EQ(buckets.size(), 2u);
  const Bucket& a = buckets[0];
  EXPECT_EQ(a.count(), 5);
  EXPECT_DOUBLE_EQ(a.min(), 1.0);
  EXPECT_DOUBLE_EQ(a.max(), 3.0);
  EXPECT_DOUBLE_EQ(a.mean(), 2.0);
  EXPECT_TRUE(std::isnan(a.last()));
  const Bucket& b = buckets[1];
  EXPECT_EQ(b.count(), 2);
  EXPECT_TRUE(std::isnan(b.min()));
  EXPECT_TRUE(std::isnan(b.max()));
  EXPECT_TRUE(std::isnan(b.mean()));
  EXPECT_EQ(b.last(), kInf);
}

// Series A: steps 0..9 value 1 and steps 10..14 value 5; series B: steps
// 0..4 value 3. Buckets over [0, 19] of width 10.
struct TwoSeries {
  BucketAccumulator a{0, 19, 2};
  BucketAccumulator b{0, 19, 2};
  TwoSeries() {
    for (int64_t s = 0; s < 10; ++s) a.Add({s, 0, 1.0});
    for (int64_t s = 10; s < 15; ++s) a.Add({s, 0, 5.0});
    for (int64_t s = 0; s < 5; ++s) b.Add({s, 0, 3.0});
  }
  std::vector<Bucket> Merge(Aggregation agg) const {
    return BucketAccumulator::Merge({&a, &b}, agg);
  }
};

void ExpectCommon(const std::vector<Bucket>& buckets) {
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].count(), 15);
  EXPECT_EQ(buckets[0].min_step(), 0);
  EXPECT_EQ(buckets[0].max_step(), 9);
  EXPECT_DOUBLE_EQ(buckets[0].min(), 1.0);
  EXPECT_DOUBLE_EQ(buckets[0].max(), 3.0);
  // Only series A has points in the second bucket.
  EXPECT_EQ(buckets[1].count(), 5);
  EXPECT_EQ(buckets[1].min_step(), 10);
  EXPECT_EQ(buckets[1].max_step(), 14);
  EXPECT_DOUBLE_EQ(buckets[1].min(), 5.0);
  EXPECT_DOUBLE_EQ(buckets[1].max(), 5.0);
  EXPECT_DOUBLE_EQ(buckets[1].mean(), 5.0);
  EXPECT_DOUBLE_EQ(buckets[1].last(), 5.0);
}

TEST(BucketAccumulatorTest, MergeMean) {
  TwoSeries t;
  const std::vector<Bucket> buckets = t.Merge(AGGREGATE_MEAN);
  ExpectCommon(buckets);
  // Weighted by finite points: (10 * 1 + 5 * 3) / 15.
  EXPECT_DOUBLE_EQ(buckets[0].mean(), 25.0 / 15);
  EXPECT_DOUBLE_EQ(buckets[0].last(), (1.0 + 3.0) / 2);
  // UNSPECIFIED merges as a mean.
  const std::vector<Bucket> unspecified = t.Merge(AGGREGATION_UNSPECIFIED);
  ASSERT_EQ(unspecified.size(), 2u);
  EXPECT_DOUBLE_EQ(unspecified[0].mean(), 25.0 / 15);
}

TEST(BucketAccumulatorTest, MergeSum) {
  TwoSeries t;
  const std::vector<Bucket> buckets = t.Merge(AGGREGATE_SUM);
  ExpectCommon(buckets);
  EXPECT_DOUBLE_EQ(buckets[0].mean(), 1.0 + 3.0);
  EXPECT_DOUBLE_EQ(buckets[0].last(), 1.0 + 3.0);
}

TEST(BucketAccumulatorTest, MergeMin) {
  TwoSeries t;
  const std::vector<Bucket> buckets = t.Merge(AGGREGATE_MIN);
  ExpectCommon(buckets);
  EXPECT_DOUBLE_EQ(buckets[0].mean(), 1.0);
  EXPECT_DOUBLE_EQ(buckets[0].last(), 1.0);
}

TEST(BucketAccumulatorTest, MergeMax) {
  TwoSeries t;
  const std::vector<Bucket> buckets = t.Merge(AGGREGATE_MAX);
  ExpectCommon(buckets);
  EXPECT_DOUBLE_EQ(buckets[0].mean(), 3.0);
  EXPECT_DOUBLE_EQ(buckets[0].last(), 3.0);
}

TEST(BucketAccumulatorTest, MergeOfNothing) {
  EXPECT_TRUE(BucketAccumulator::Merge({}, AGGREGATE_MEAN).empty());
  BucketAccumulator a(0, 9, 2), b(0, 9, 2);
  EXPECT_TRUE(BucketAccumulator::Merge({&a, &b}, AGGREGATE_SUM).empty());
}

std::vector<std::vector<PointRecord>> StepSeries() {
  return {
      {{3, 30, 3.0}, {1, 10, 1.0}},
      {{3, 35, 5.0}, {2, 20, 2.0}},
      {{3, 31, 7.0}},
  };
}

TEST(MergeByStepTest, CombinesEqualStepsAndSorts) {
  struct Case {
    Aggregation agg;
    double at_step3;
  };
  for (const Case& c : {Case{AGGREGATE_MEAN, 5.0}, Case{AGGREGATE_SUM, 15.0},
                        Case{AGGREGATE_MIN, 3.0}, Case{AGGREGATE_MAX, 7.0},
                        Case{AGGREGATION_UNSPECIFIED, 5.0}}) {
    SCOPED_TRACE(Aggregation_Name(c.agg));
    const std::vector<PointRecord> out = MergeByStep(StepSeries(), c.agg);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].step, 1);
    EXPECT_DOUBLE_EQ(out[0].value, 1.0);
    EXPECT_EQ(out[0].wall_ns, 10);
    EXPECT_EQ(out[1].step, 2);
    EXPECT_DOUBLE_EQ(out[1].value, 2.0);
    EXPECT_EQ(out[1].wall_ns, 20);
    EXPECT_EQ(out[2].step, 3);
    EXPECT_DOUBLE_EQ(out[2].value, c.at_step3);
    EXPECT_EQ(out[2].wall_ns, 35);  // the latest wall time of the step
  }
}

TEST(MergeByStepTest, SingleAndEmptySeries) {
  EXPECT_TRUE(MergeByStep({}, AGGREGATE_MEAN).empty());
  EXPECT_TRUE(MergeByStep({{}, {}}, AGGREGATE_SUM).empty());
  const std::vector<PointRecord> out =
      MergeByStep({{{5, 1, 50.0}, {4, 2, 40.0}}}, AGGREGATE_MEAN);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].step, 4);
  EXPECT_DOUBLE_EQ(out[0].value, 40.0);
  EXPECT_EQ(out[1].step, 5);
  EXPECT_DOUBLE_EQ(out[1].value, 50.0);
}

}  // namespace
}  // namespace rl
