// What one MetricStore::Write holds until it commits (metric_store.cc), and
// the keys under which the catalog finds series and streams, which the
// loading of the catalog (metric_store_schema.cc) shares. Internal to the
// metric_store library.
#ifndef RL_TELEMETRY_METRIC_STORE_WRITE_H_
#define RL_TELEMETRY_METRIC_STORE_WRITE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "telemetry/downsample.h"
#include "telemetry/metric_store.h"
#include "telemetry/metric_store_catalog.h"
#include "telemetry/stream_ledger.h"

namespace rl {

// Canonical text of a label set: sorted "key\x1fvalue\x1e" pairs.
inline std::string LabelsKey(const Labels& sorted) {
  std::string key;
  for (const auto& [k, v] : sorted) absl::StrAppend(&key, k, "\x1f", v, "\x1e");
  return key;
}

// One emitter stream: its source, its process's incarnation and the run its
// batches are for (a process reusing its source and incarnation for another
// run numbers that run's batches afresh). The source comes first.
inline std::string StreamKey(absl::string_view source, int64_t incarnation,
                             absl::string_view run_id) {
  return absl::StrCat(source, std::string(1, '\0'), incarnation,
                      std::string(1, '\0'), run_id);
}

inline std::string SeriesKey(absl::string_view run, absl::string_view name,
                             absl::string_view labels_key) {
  return absl::StrCat(run, std::string(1, '\0'), name, std::string(1, '\0'),
                      labels_key);
}

// The points of one Write for one series, in arrival order, with the batch
// (index in the Write) each came from.
struct PendingPoints {
  std::vector<PointRecord> points;
  std::vector<size_t> batch;
  int64_t max_step = INT64_MIN;
  // Over the points of the batches before the current one.
  int64_t max_step_before = INT64_MIN;
  // A batch repeats a step of an earlier batch of this Write.
  bool repeats_step = false;

  void Add(size_t batch_index, const PointRecord& r) {
    if (!batch.empty() && batch.back() != batch_index) {
      max_step_before = max_step;
    }
    if (r.step <= max_step_before) repeats_step = true;
    max_step = std::max(max_step, r.step);
    points.push_back(r);
    batch.push_back(batch_index);
  }

  // Keeps, for each step, only the points of the latest batch that has it.
  void KeepLatestBatchPerStep() {
    if (!repeats_step) return;
    absl::flat_hash_map<int64_t, size_t> latest;
    for (size_t k = 0; k < points.size(); ++k) {
      size_t& b = latest[points[k].step];
      b = std::max(b, batch[k]);
    }
    size_t kept = 0;
    for (size_t k = 0; k < points.size(); ++k) {
      if (latest[points[k].step] != batch[k]) continue;
      points[kept] = points[k];
      batch[kept] = batch[k];
      ++kept;
    }
    points.resize(kept);
    batch.resize(kept);
  }
};

// What one Write holds until it commits: the streams it looked at (copies
// of the catalog's) and those it stored batches of, the series it creates,
// and the new points of each series it touches, in first-touched order.
struct MetricStore::PendingWrite {
  struct Stats {
    int64_t num_points, last_step, last_wall_ns;
  };
  std::vector<std::pair<SeriesEntry*, PendingPoints>> touched;
  absl::flat_hash_map<SeriesEntry*, size_t> touched_index;
  std::vector<Stats> stats;  // per touched series, once appended
  absl::flat_hash_map<std::string, StreamLedger> streams;
  absl::flat_hash_set<std::string> streams_stored;
  std::vector<std::unique_ptr<SeriesEntry>> created;  // not yet in the catalog
  absl::flat_hash_map<std::string, SeriesEntry*> created_by_key;
  absl::flat_hash_map<std::string, int64_t> created_per_run;
  absl::flat_hash_map<std::string, int64_t> created_per_source;

  SeriesEntry* FindSeries(Catalog& c, const std::string& key) {
    auto it = created_by_key.find(key);
    if (it != created_by_key.end()) return it->second;
    absl::MutexLock lock(&c.mu);
    auto jt = c.by_key.find(key);
    return jt == c.by_key.end() ? nullptr : jt->second;
  }
  int64_t RunSeriesCount(Catalog& c, const std::string& run) {
    absl::MutexLock lock(&c.mu);
    auto it = c.by_run.find(run);
    return static_cast<int64_t>(it == c.by_run.end() ? 0 : it->second.size()) +
           created_per_run[run];
  }
  // Runs stored plus those this call creates.
  int64_t RunCount(Catalog& c) {
    int64_t runs = 0;
    absl::MutexLock lock(&c.mu);
    for (const auto& [run, n] : created_per_run) {
      if (n > 0 && !c.by_run.count(run)) ++runs;
    }
    return static_cast<int64_t>(c.by_run.size()) + runs;
  }
  void Add(SeriesEntry* e, size_t batch, const PointRecord& r) {
    auto [it, inserted] = touched_index.try_emplace(e, touched.size());
    if (inserted) touched.push_back({e, {}});
    touched[it->second].second.Add(batch, r);
  }
};

}  // namespace rl

#endif  // RL_TELEMETRY_METRIC_STORE_WRITE_H_
