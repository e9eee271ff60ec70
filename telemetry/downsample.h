// Step-bucketed downsampling of metric series (min/max/mean/last per bucket)
// and merging of series across labels. Pure functions over points; the store
// feeds them from its chunks.
//
// Non-finite values (NaN, +-inf) are stored and returned as they are. In a
// bucket, `count` counts every point, `min`/`max`/`mean` are over the finite
// points only (NaN when there are none), and `last` is the value of the point
// with the largest step, whatever it is.
#ifndef RL_TELEMETRY_DOWNSAMPLE_H_
#define RL_TELEMETRY_DOWNSAMPLE_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "proto/telemetry.pb.h"

namespace rl {

// A point as the store keeps it: 24 bytes, no name or labels.
struct PointRecord {
  int64_t step;
  int64_t wall_ns;
  double value;
};
static_assert(sizeof(PointRecord) == 24, "packed on disk");

// Accumulates points into `num_buckets` buckets of equal step width covering
// [lo, hi].
class BucketAccumulator {
 public:
  BucketAccumulator(int64_t lo, int64_t hi, int num_buckets);

  void Add(const PointRecord& p) {
    if (p.step < lo_ || p.step > hi_) return;
    // In unsigned steps: a span over 2^63 does not overflow.
    const uint64_t at =
        (static_cast<uint64_t>(p.step) - static_cast<uint64_t>(lo_)) / width_;
    Acc& a = acc_[std::min(static_cast<size_t>(at), acc_.size() - 1)];
    ++a.count;
    if (p.step < a.min_step) a.min_step = p.step;
    if (p.step >= a.max_step) {
      a.max_step = p.step;
      a.last = p.value;
    }
    if (p.value - p.value == 0) {  // finite
      ++a.finite;
      a.sum += p.value;
      if (p.value < a.min) a.min = p.value;
      if (p.value > a.max) a.max = p.value;
    }
  }

  // Non-empty buckets in step order.
  std::vector<Bucket> Buckets() const;

  // Combines per-series accumulators over the same range: counts add up,
  // min/max are over all points, mean and last combine each series' bucket
  // mean and last with `aggregation` (mean weighted by finite points).
  static std::vector<Bucket> Merge(
      const std::vector<const BucketAccumulator*>& series,
      Aggregation aggregation);

 private:
  struct Acc {
    int64_t count = 0;
    int64_t finite = 0;
    double sum = 0;
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    double last = 0;
    int64_t min_step = INT64_MAX;
    int64_t max_step = INT64_MIN;
  };
  static Bucket ToBucket(const Acc& a);

  int64_t lo_;
  int64_t hi_;
  uint64_t width_;
  std::vector<Acc> acc_;
};

// Raw points of several series merged by step: points with the same step are
// combined with `aggregation` (UNSPECIFIED counts as mean). Sorted by step.
std::vector<PointRecord> MergeByStep(
    const std::vector<std::vector<PointRecord>>& series,
    Aggregation aggregation);

}  // namespace rl

#endif  // RL_TELEMETRY_DOWNSAMPLE_H_
