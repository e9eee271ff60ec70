#include "telemetry/downsample.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace rl {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

BucketAccumulator::BucketAccumulator(int64_t lo, int64_t hi, int num_buckets)
    : lo_(lo), hi_(std::max(lo, hi)) {
  const int64_t n = std::max(1, num_buckets);
  // Width rounded up so n buckets cover [lo, hi]; computed without overflow
  // (the whole int64 range in one bucket is a width of 2^64, kept as the
  // largest uint64, its last step clamped into the bucket).
  const uint64_t span = static_cast<uint64_t>(hi_) - static_cast<uint64_t>(lo_);
  width_ = span / static_cast<uint64_t>(n);
  if (width_ < std::numeric_limits<uint64_t>::max()) ++width_;
  acc_.resize(static_cast<size_t>(
      std::min<uint64_t>(static_cast<uint64_t>(n), span / width_ + 1)));
}

Bucket BucketAccumulator::ToBucket(const Acc& a) {
  Bucket b;
  b.set_min_step(a.min_step);
  b.set_max_step(a.max_step);
  b.set_count(a.count);
  b.set_min(a.finite ? a.min : kNaN);
  b.set_max(a.finite ? a.max : kNaN);
  b.set_mean(a.finite ? a.sum / static_cast<double>(a.finite) : kNaN);
  b.set_last(a.last);
  return b;
}

std::vector<Bucket> BucketAccumulator::Buckets() const {
  std::vector<Bucket> out;
  for (const Acc& a : acc_) {
    if (a.count > 0) out.push_back(ToBucket(a));
  }
  return out;
}

std::vector<Bucket> BucketAccumulator::Merge(
    const std::vector<const BucketAccumulator*>& series,
    Aggregation aggregation) {
  std::vector<Bucket> out;
  if (series.empty()) return out;
  const size_t n = series.front()->acc_.size();
  for (size_t i = 0; i < n; ++i) {
    Acc total;
    int contributors = 0;
    double mean_agg = 0, last_agg = 0;
    int64_t weight = 0;
    for (const BucketAccumulator* s : series) {
      if (i >= s->acc_.size()) continue;
      const Acc& a = s->acc_[i];
      if (a.count == 0) continue;
      const double mean =
          a.finite ? a.sum / static_cast<double>(a.finite) : kNaN;
      total.count += a.count;
      total.finite += a.finite;
      total.min = std::min(total.min, a.min);
      total.max = std::max(total.max, a.max);
      total.min_step = std::min(total.min_step, a.min_step);
      total.max_step = std::max(total.max_step, a.max_step);
      switch (aggregation) {
        case AGGREGATE_SUM:
          mean_agg += a.finite ? mean : 0;
          last_agg += a.last;
          break;
        case AGGREGATE_MIN:
          mean_agg = contributors == 0 ? mean : std::fmin(mean_agg, mean);
          last_agg = contributors == 0 ? a.last : std::fmin(last_agg, a.last);
          break;
        case AGGREGATE_MAX:
          mean_agg = contributors == 0 ? mean : std::fmax(mean_agg, mean);
          last_agg = contributors == 0 ? a.last : std::fmax(last_agg, a.last);
          break;
        default:  // mean, weighted by finite points; last: plain mean
          mean_agg += a.sum;
          weight += a.finite;
          last_agg += a.last;
          break;
      }
      ++contributors;
    }
    if (contributors == 0) continue;
    Bucket b = ToBucket(total);
    if (aggregation == AGGREGATE_SUM || aggregation == AGGREGATE_MIN ||
        aggregation == AGGREGATE_MAX) {
      b.set_mean(mean_agg);
      b.set_last(last_agg);
    } else {
      b.set_mean(weight ? mean_agg / static_cast<double>(weight) : kNaN);
      b.set_last(last_agg / contributors);
    }
    out.push_back(b);
  }
  return out;
}

std::vector<PointRecord> MergeByStep(
    const std::vector<std::vector<PointRecord>>& series,
    Aggregation aggregation) {
  struct Acc {
    int64_t wall_ns = 0;
    double value = 0;
    int n = 0;
  };
  std::map<int64_t, Acc> by_step;
  for (const auto& points : series) {
    for (const PointRecord& p : points) {
      Acc& a = by_step[p.step];
      a.wall_ns = std::max(a.wall_ns, p.wall_ns);
      if (a.n == 0) {
        a.value = p.value;
      } else {
        switch (aggregation) {
          case AGGREGATE_MIN:
            a.value = std::fmin(a.value, p.value);
            break;
          case AGGREGATE_MAX:
            a.value = std::fmax(a.value, p.value);
            break;
          default:  // sum, and the running sum of a mean
            a.value += p.value;
            break;
        }
      }
      ++a.n;
    }
  }
  std::vector<PointRecord> out;
  out.reserve(by_step.size());
  for (const auto& [step, a] : by_step) {
    double v = a.value;
    if (aggregation != AGGREGATE_SUM && aggregation != AGGREGATE_MIN &&
        aggregation != AGGREGATE_MAX) {
      v /= a.n;
    }
    out.push_back({step, a.wall_ns, v});
  }
  return out;
}

}  // namespace rl
