// The metric store's in-memory catalog of series (metric_store.cc writes
// it, metric_store_query.cc reads it). Internal to the metric_store
// library.
#ifndef RL_TELEMETRY_METRIC_STORE_CATALOG_H_
#define RL_TELEMETRY_METRIC_STORE_CATALOG_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "telemetry/metric_store.h"
#include "telemetry/stream_ledger.h"

namespace rl {

// A series' labels, sorted by key.
using Labels = std::vector<std::pair<std::string, std::string>>;

struct SeriesEntry {
  int64_t id = 0;
  std::string run_id;
  std::string name;
  Labels labels;
  // Counters; guarded by Catalog::mu.
  int64_t num_points = 0;
  int64_t last_step = 0;
  int64_t last_wall_ns = 0;
  // The chunk still being appended to (writer only).
  int64_t open_chunk = 0;
  int64_t open_count = 0;
};

struct MetricStore::Catalog {
  absl::Mutex mu;
  std::vector<std::unique_ptr<SeriesEntry>> series ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, SeriesEntry*> by_key ABSL_GUARDED_BY(mu);
  std::map<std::string, std::vector<SeriesEntry*>> by_run ABSL_GUARDED_BY(mu);
  // source \0 incarnation -> its stored sequence numbers (writer only).
  absl::flat_hash_map<std::string, StreamLedger> streams;
};

}  // namespace rl

#endif  // RL_TELEMETRY_METRIC_STORE_CATALOG_H_
