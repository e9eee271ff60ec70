#include "telemetry/watch_backlog.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rl {

int64_t WatchBacklog::PointBytes(const MetricPoint& point) {
  return static_cast<int64_t>(point.ByteSizeLong() + sizeof(MetricPoint));
}

absl::Status WatchBacklog::Push(const MetricPoint& point) {
  if (!overflow_.ok()) return overflow_;
  const int64_t bytes = PointBytes(point);
  if (bytes_ + bytes > max_bytes_) {
    overflow_ = absl::ResourceExhaustedError(absl::StrCat(
        "watcher fell behind by ", bytes_ + bytes, " bytes (", points_.size(),
        " points not yet read, at most ", max_bytes_,
        " bytes per watcher: max_watch_backlog_bytes); read faster or watch "
        "fewer series"));
    std::deque<MetricPoint>().swap(points_);  // frees the blocks too
    bytes_ = 0;
    return overflow_;
  }
  points_.push_back(point);
  bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  return absl::OkStatus();
}

bool WatchBacklog::Pop(MetricPoint* out) {
  if (points_.empty()) return false;
  *out = std::move(points_.front());
  points_.pop_front();
  bytes_ -= PointBytes(*out);
  return true;
}

}  // namespace rl
