// ValidateBatch (metric_store.h): what the store takes from an emitter,
// checked field by field before anything is written.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status.h"
#include "telemetry/client/metric_limits.h"
#include "telemetry/metric_store.h"

namespace rl {
namespace {

absl::Status CheckText(absl::string_view value, const std::string& field,
                       size_t min_len, size_t max_len) {
  if (value.size() < min_len || value.size() > max_len) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": length ", value.size(), " is outside [", min_len,
                     ", ", max_len, "]"));
  }
  if (!PrintableText(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": contains control characters"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBatch(const MetricBatch& batch) {
  RETURN_IF_ERROR(CheckText(batch.run_id(), "batch.run_id", 1, 128));
  RETURN_IF_ERROR(CheckText(batch.source(), "batch.source", 1, 128));
  if (batch.sequence_number() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch.sequence_number: ", batch.sequence_number(),
                     " (sequence numbers start at 1)"));
  }
  if (batch.dropped_points() < 0) {
    return absl::InvalidArgumentError("batch.dropped_points: negative");
  }
  if (batch.points_size() > kMaxPointsPerBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch.points: ", batch.points_size(), " points, at most ",
                     kMaxPointsPerBatch, " per batch"));
  }
  for (int i = 0; i < batch.points_size(); ++i) {
    const MetricPoint& p = batch.points(i);
    const std::string field = absl::StrCat("batch.points[", i, "]");
    RETURN_IF_ERROR(
        CheckText(p.name(), field + ".name", 1, kMaxMetricNameBytes));
    if (p.labels_size() > kMaxLabels) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".labels: ", p.labels_size(), " labels, at most ",
                       kMaxLabels));
    }
    for (const auto& [k, v] : p.labels()) {
      RETURN_IF_ERROR(CheckText(k, absl::StrCat(field, ".labels key"), 1,
                                kMaxLabelKeyBytes));
      RETURN_IF_ERROR(CheckText(v, absl::StrCat(field, ".labels[", k, "]"), 0,
                                kMaxLabelValueBytes));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStoreOptions(const MetricStoreOptions& o) {
  std::vector<std::string> bad;
  if (o.max_points_per_series < 0 ||
      (o.max_points_per_series > 0 &&
       o.max_points_per_series < MetricStore::kChunkPoints)) {
    bad.push_back(absl::StrCat("max_points_per_series ",
                               o.max_points_per_series, ": 0 (keep all) or ",
                               "at least ", MetricStore::kChunkPoints,
                               " (points go a chunk of that many at a time)"));
  }
  if (o.run_retention < absl::ZeroDuration()) {
    bad.push_back(absl::StrCat("run retention (retention_days) ",
                               absl::FormatDuration(o.run_retention),
                               ": 0 (keep) or more"));
  }
  if (o.stream_retention < absl::ZeroDuration()) {
    bad.push_back(absl::StrCat("stream_retention ",
                               absl::FormatDuration(o.stream_retention),
                               ": 0 (never forget) or more"));
  }
  if (o.max_series_per_run < 1) {
    bad.push_back(absl::StrCat("max_series_per_run ", o.max_series_per_run,
                               ": at least 1"));
  }
  if (o.max_series_per_source < 0) {
    bad.push_back(absl::StrCat("max_series_per_source ",
                               o.max_series_per_source,
                               ": 0 (no limit) or more"));
  }
  if (o.max_runs < 1) {
    bad.push_back(absl::StrCat("max_runs ", o.max_runs, ": at least 1"));
  }
  if (o.max_new_runs_per_source_per_minute < 0) {
    bad.push_back(absl::StrCat("max_new_runs_per_source_per_minute ",
                               o.max_new_runs_per_source_per_minute,
                               ": 0 (no limit) or more"));
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("telemetry store limits: ", absl::StrJoin(bad, "; ")));
}

}  // namespace rl
