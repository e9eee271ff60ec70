// What the metric store lets go: a series' oldest points beyond
// max_points_per_series (inside Write's transaction), runs past their
// retention or deleted, and emitter streams idle past stream_retention.
// Writes are metric_store.cc, reads metric_store_query.cc.
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sqlite_util.h"
#include "common/status.h"
#include "telemetry/metric_store.h"
#include "telemetry/metric_store_catalog.h"

namespace rl {

absl::StatusOr<int64_t> MetricStore::TrimSeries(int64_t series_id,
                                                int64_t open_chunk,
                                                int64_t num_points) {
  // Oldest chunks first (by step), never the open one.
  Statement list(writer_,
                 "SELECT id, count FROM chunks WHERE series_id = ? "
                 "ORDER BY min_step, id;");
  RETURN_IF_ERROR(list.status());
  list.Bind(1, series_id);
  std::vector<int64_t> doomed;
  int64_t removed = 0;
  int rc;
  while (num_points - removed > options_.max_points_per_series &&
         (rc = list.Step()) == SQLITE_ROW) {
    if (list.Int(0) == open_chunk) continue;
    doomed.push_back(list.Int(0));
    removed += list.Int(1);
  }
  Statement del(writer_, "DELETE FROM chunks WHERE id = ?;");
  RETURN_IF_ERROR(del.status());
  for (int64_t id : doomed) {
    del.Reset();
    del.Bind(1, id);
    RETURN_IF_ERROR(del.Done(del.Step()));
  }
  return removed;
}

absl::StatusOr<int> MetricStore::ApplyRetention(absl::Time now) {
  if (options_.run_retention <= absl::ZeroDuration()) return 0;
  const int64_t cutoff = absl::ToUnixNanos(now - options_.run_retention);
  int deleted = 0;
  for (const RunSummary& r : ListRuns()) {
    if (r.last_wall_time_ns < cutoff) {
      RETURN_IF_ERROR(DeleteRun(r.run_id));
      ++deleted;
    }
  }
  return deleted;
}

absl::StatusOr<int> MetricStore::ForgetIdleStreams(absl::Time now) {
  if (options_.stream_retention <= absl::ZeroDuration()) return 0;
  const int64_t cutoff = absl::ToUnixNanos(now - options_.stream_retention);
  absl::MutexLock write_lock(&write_mu_);
  Catalog& c = *catalog_;
  int forgotten = 0;
  for (const auto& [key, state] : c.streams) {
    if (state.last_write_ns < cutoff) ++forgotten;
  }
  if (forgotten == 0) return 0;
  RETURN_IF_ERROR(ExecSql(writer_, "BEGIN IMMEDIATE;"));
  Statement streams(writer_, "DELETE FROM streams WHERE last_write_ns < ?;");
  Statement gaps(writer_,
                 "DELETE FROM stream_gaps WHERE NOT EXISTS (SELECT 1 FROM "
                 "streams s WHERE s.source = stream_gaps.source AND "
                 "s.incarnation = stream_gaps.incarnation AND s.run_id = "
                 "stream_gaps.run_id);");
  absl::Status deleted = streams.status();
  if (deleted.ok()) {
    streams.Bind(1, cutoff);
    deleted = streams.Done(streams.Step());
  }
  if (deleted.ok()) deleted = gaps.status();
  if (deleted.ok()) deleted = gaps.Done(gaps.Step());
  if (!deleted.ok()) {
    ExecSql(writer_, "ROLLBACK;").IgnoreError();
    return deleted;
  }
  RETURN_IF_ERROR(ExecSql(writer_, "COMMIT;"));
  absl::flat_hash_set<std::string> sources;
  for (auto it = c.streams.begin(); it != c.streams.end();) {
    if (it->second.last_write_ns < cutoff) {
      c.streams.erase(it++);
    } else {
      sources.insert(it->first.substr(0, it->first.find('\0')));
      ++it;
    }
  }
  // A source none of whose streams is left starts its series count (and
  // its new-run budget) afresh.
  for (auto it = series_by_source_.begin(); it != series_by_source_.end();) {
    if (sources.contains(it->first)) {
      ++it;
    } else {
      series_by_source_.erase(it++);
    }
  }
  for (auto it = new_runs_by_source_.begin();
       it != new_runs_by_source_.end();) {
    absl::string_view key = it->first;
    // A caller's budget goes once it has refilled (a minute untouched).
    const bool refilled = now - it->second.at >= absl::Minutes(1);
    if (absl::ConsumePrefix(&key, "source:") ? sources.contains(key)
                                             : !refilled) {
      ++it;
    } else {
      new_runs_by_source_.erase(it++);
    }
  }
  return forgotten;
}

absl::Status MetricStore::DeleteRun(const std::string& run_id) {
  absl::MutexLock write_lock(&write_mu_);
  RETURN_IF_ERROR(ExecSql(writer_, "BEGIN IMMEDIATE;"));
  for (const char* sql : {"DELETE FROM chunks WHERE series_id IN "
                          "(SELECT id FROM series WHERE run_id = ?);",
                          "DELETE FROM series WHERE run_id = ?;"}) {
    Statement del(writer_, sql);
    absl::Status s = del.status();
    if (s.ok()) {
      del.Bind(1, run_id);
      s = del.Done(del.Step());
    }
    if (!s.ok()) {
      ExecSql(writer_, "ROLLBACK;").IgnoreError();
      return s;
    }
  }
  RETURN_IF_ERROR(ExecSql(writer_, "COMMIT;"));
  return LoadCatalog();
}

}  // namespace rl
