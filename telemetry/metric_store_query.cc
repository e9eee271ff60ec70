// MetricStore's reads: queries (raw and downsampled, merged over labels),
// the series and the runs it holds. Writes are metric_store.cc.
#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sqlite_util.h"
#include "common/status.h"
#include "telemetry/downsample.h"
#include "telemetry/metric_store.h"
#include "telemetry/metric_store_catalog.h"
#include "telemetry/point_chunk.h"

namespace rl {

namespace {

struct SelectedSeries {
  int64_t id;
  std::string name;
  Labels labels;
};

// Labels of a series with `drop` keys removed.
Labels WithoutKeys(
    const Labels& labels,
    const google::protobuf::RepeatedPtrField<std::string>& drop) {
  Labels out;
  for (const auto& kv : labels) {
    if (std::find(drop.begin(), drop.end(), kv.first) == drop.end()) {
      out.push_back(kv);
    }
  }
  return out;
}

bool NameMatches(const std::string& name,
                 const google::protobuf::RepeatedPtrField<std::string>& names,
                 const std::string& prefix) {
  if (!names.empty()) {
    return std::find(names.begin(), names.end(), name) != names.end();
  }
  return absl::StartsWith(name, prefix);
}

}  // namespace

absl::StatusOr<QueryResponse> MetricStore::Query(const QueryRequest& request) {
  if (request.run_id().empty()) {
    return absl::InvalidArgumentError("request.run_id: empty");
  }
  if (request.max_buckets() < 0 || request.max_buckets() > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("request.max_buckets: ", request.max_buckets(),
                     " is outside [0, 100000]"));
  }
  const int64_t min_step = request.min_step();
  const int64_t max_step =
      request.max_step() == 0 ? INT64_MAX : request.max_step();
  if (min_step > max_step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request.min_step: ", min_step, " > request.max_step ", max_step));
  }
  const int64_t min_wall = request.min_wall_time_ns();
  const int64_t max_wall =
      request.max_wall_time_ns() == 0 ? INT64_MAX : request.max_wall_time_ns();

  // Select the series and group them by (name, labels without the merged
  // keys).
  std::map<std::pair<std::string, Labels>, std::vector<SelectedSeries>> groups;
  {
    Catalog& c = *catalog_;
    absl::MutexLock lock(&c.mu);
    auto it = c.by_run.find(request.run_id());
    if (it == c.by_run.end()) {
      return absl::NotFoundError(
          absl::StrCat("run ", request.run_id(), " has no metrics"));
    }
    for (const SeriesEntry* e : it->second) {
      if (!NameMatches(e->name, request.names(), request.name_prefix())) {
        continue;
      }
      groups[{e->name, WithoutKeys(e->labels, request.aggregate_labels())}]
          .push_back({e->id, e->name, e->labels});
    }
  }

  if (request.max_buckets() > 0) {
    int64_t selected = 0;
    for (const auto& [key, members] : groups) selected += members.size();
    if (selected * request.max_buckets() > options_.max_bucket_slots) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "query selects ", selected, " series at ", request.max_buckets(),
          " buckets each (max_buckets): ", selected * request.max_buckets(),
          " buckets, at most ", options_.max_bucket_slots,
          "; select fewer series or ask for fewer buckets"));
    }
  }

  absl::MutexLock lock(&read_mu_);
  RETURN_IF_ERROR(ExecSql(reader_, "BEGIN;"));  // one snapshot for all reads
  struct EndRead {
    sqlite3* db;
    ~EndRead() { ExecSql(db, "COMMIT;").IgnoreError(); }
  } end_read{reader_};
  Statement range(reader_,
                  "SELECT min(min_step), max(max_step) FROM chunks WHERE "
                  "series_id = ? AND max_step >= ? AND min_step <= ?;");
  Statement chunks(reader_,
                   "SELECT data FROM chunks WHERE series_id = ? AND "
                   "max_step >= ? AND min_step <= ? ORDER BY min_step, id;");
  RETURN_IF_ERROR(range.status());
  RETURN_IF_ERROR(chunks.status());
  // Set by a raw read past max_raw_points: the chunks left are not read.
  bool too_many = false;
  auto for_each_point = [&](int64_t series_id, auto&& f) -> absl::Status {
    chunks.Reset();
    chunks.Bind(1, series_id);
    chunks.Bind(2, min_step);
    chunks.Bind(3, max_step);
    int rc;
    while ((rc = chunks.Step()) == SQLITE_ROW) {
      if (too_many) return absl::OkStatus();
      ForEachPoint(chunks.BlobView(0), [&](const PointRecord& p) {
        if (p.step < min_step || p.step > max_step || p.wall_ns < min_wall ||
            p.wall_ns > max_wall) {
          return;
        }
        f(p);
      });
    }
    return chunks.Done(rc);
  };

  QueryResponse response;
  int64_t raw_points = 0;
  for (const auto& [key, members] : groups) {
    Series* out = response.add_series();
    out->set_name(key.first);
    for (const auto& [k, v] : key.second) (*out->mutable_labels())[k] = v;
    if (request.max_buckets() > 0) {
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (const SelectedSeries& s : members) {
        range.Reset();
        range.Bind(1, s.id);
        range.Bind(2, min_step);
        range.Bind(3, max_step);
        if (range.Step() == SQLITE_ROW && !range.IsNull(0)) {
          lo = std::min(lo, range.Int(0));
          hi = std::max(hi, range.Int(1));
        }
      }
      if (lo > hi) continue;  // no points in range
      lo = std::max(lo, min_step);
      hi = std::min(hi, max_step);
      std::vector<std::unique_ptr<BucketAccumulator>> accs;
      for (const SelectedSeries& s : members) {
        accs.push_back(
            std::make_unique<BucketAccumulator>(lo, hi, request.max_buckets()));
        BucketAccumulator* acc = accs.back().get();
        RETURN_IF_ERROR(
            for_each_point(s.id, [acc](const PointRecord& p) { acc->Add(p); }));
      }
      std::vector<Bucket> buckets;
      if (accs.size() == 1) {
        buckets = accs[0]->Buckets();
      } else {
        std::vector<const BucketAccumulator*> parts;
        for (const auto& a : accs) parts.push_back(a.get());
        buckets = BucketAccumulator::Merge(parts, request.aggregation());
      }
      for (Bucket& b : buckets) *out->add_buckets() = std::move(b);
      continue;
    }
    std::vector<std::vector<PointRecord>> parts;
    for (const SelectedSeries& s : members) {
      parts.emplace_back();
      std::vector<PointRecord>* pts = &parts.back();
      // Counted as read, so a series far over the limit is not held in
      // memory whole before the query is refused.
      RETURN_IF_ERROR(for_each_point(s.id, [&](const PointRecord& p) {
        if (++raw_points > options_.max_raw_points) too_many = true;
        if (!too_many) pts->push_back(p);
      }));
      if (too_many) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "query matches more than ", options_.max_raw_points,
            " raw points; narrow the step range or set max_buckets"));
      }
    }
    std::vector<PointRecord> points;
    if (parts.size() == 1) {
      points = std::move(parts[0]);
      std::stable_sort(points.begin(), points.end(),
                       [](const PointRecord& a, const PointRecord& b) {
                         return a.step < b.step;
                       });
    } else {
      points = MergeByStep(parts, request.aggregation());
    }
    for (const PointRecord& p : points) {
      MetricPoint* mp = out->add_points();
      mp->set_step(p.step);
      mp->set_wall_time_ns(p.wall_ns);
      mp->set_value(p.value);
    }
  }
  return response;
}

std::vector<SeriesInfo> MetricStore::ListSeries(
    const std::string& run_id, const std::string& name_prefix) {
  std::vector<SeriesInfo> out;
  Catalog& c = *catalog_;
  absl::MutexLock lock(&c.mu);
  for (const auto& [run, entries] : c.by_run) {
    if (!run_id.empty() && run != run_id) continue;
    for (const SeriesEntry* e : entries) {
      if (!absl::StartsWith(e->name, name_prefix)) continue;
      SeriesInfo info;
      info.set_run_id(e->run_id);
      info.set_name(e->name);
      for (const auto& [k, v] : e->labels) (*info.mutable_labels())[k] = v;
      info.set_num_points(e->num_points);
      info.set_last_step(e->last_step);
      out.push_back(std::move(info));
    }
  }
  return out;
}

std::vector<RunSummary> MetricStore::ListRuns() {
  std::vector<RunSummary> out;
  Catalog& c = *catalog_;
  absl::MutexLock lock(&c.mu);
  for (const auto& [run, entries] : c.by_run) {
    RunSummary r;
    r.run_id = run;
    for (const SeriesEntry* e : entries) {
      ++r.num_series;
      r.num_points += e->num_points;
      r.last_step = std::max(r.last_step, e->last_step);
      r.last_wall_time_ns = std::max(r.last_wall_time_ns, e->last_wall_ns);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace rl
