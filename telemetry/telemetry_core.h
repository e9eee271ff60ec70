// The telemetry service's logic without gRPC: validated batches go through
// one writer thread that stores them in groups (one SQLite transaction per
// group, so many small batches share one fsync), then reports each batch's
// outcome (the service acknowledges only after that), feeds live watchers,
// and hands the points to TensorBoard event files on a thread of their own.
//
// Everything a client can make it hold is bounded: batches and bytes in
// flight over all streams, watchers, runs and series (the store), open event
// files, and the event files' backlog. A refusal names the option and is
// counted in stats(); it is RESOURCE_EXHAUSTED, except for a batch of a new
// run or series beyond the store's limits: FAILED_PRECONDITION, as a resend
// would be refused again.
#ifndef RL_TELEMETRY_TELEMETRY_CORE_H_
#define RL_TELEMETRY_TELEMETRY_CORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"
#include "proto/telemetry.pb.h"
#include "telemetry/metric_store.h"

namespace rl {

struct TelemetryCoreOptions {
  std::string store_path;
  // Per-run event files under <dir>/<run_id>/; empty: none.
  std::string tensorboard_dir;
  MetricStoreOptions store;
  // Batches stored per transaction, at most.
  int max_group_batches = 512;
  // How often retention is applied.
  absl::Duration retention_interval = absl::Minutes(1);
  // Batches, and their bytes (serialized size), submitted but not yet
  // stored, over all streams; a batch beyond either is refused until the
  // store catches up. One batch is always admitted when none is in flight, so
  // any batch that passes validation gets through eventually.
  int max_ingest_batches = 4096;
  int64_t max_ingest_bytes = int64_t{128} << 20;
  // Live watchers at once; more are refused.
  int max_watchers = 64;
  // Event files open at once; the least recently written is closed and
  // reopened for append when its run gets points again.
  int max_open_event_files = 64;
  // Bytes of stored batches waiting for the event-file thread; beyond, a
  // batch skips the event files (counted; the store has its points).
  int64_t max_tensorboard_backlog_bytes = int64_t{64} << 20;
};

struct TelemetryCoreStats {
  int64_t stored_points = 0;
  int64_t stored_batches = 0;
  int64_t duplicate_batches = 0;
  int64_t refused_batches = 0;
  int64_t transactions = 0;
  int64_t queued_batches = 0;
  int64_t watchers = 0;
  int64_t tensorboard_points = 0;
  int64_t tensorboard_errors = 0;
  // Points never written to event files: their backlog was full.
  int64_t tensorboard_dropped_points = 0;
  int64_t open_event_files = 0;
  // Submitted, not yet stored (queued or being written).
  int64_t in_flight_batches = 0;
  int64_t in_flight_bytes = 0;
  // Refusals, by the limit that refused.
  int64_t refused_ingest_budget = 0;      // max_ingest_batches / _bytes
  int64_t refused_watchers = 0;           // max_watchers
  int64_t refused_watch_backlog = 0;      // a watcher's on_point said stop
  int64_t refused_series_per_run = 0;     // store.max_series_per_run
  int64_t refused_series_per_source = 0;  // store.max_series_per_source
  int64_t refused_runs = 0;               // store.max_runs
  // store.max_new_runs_per_source_per_minute
  int64_t refused_runs_per_source = 0;
};

class TelemetryCore {
 public:
  // Runs on the writer thread once the batch is durable (OK, also for a
  // resent duplicate) or refused; must not block.
  using DoneCallback = std::function<void(absl::Status)>;
  // Returns false when the watcher can take no more (its client fell
  // behind): the core drops the watcher at once and counts it.
  using PointCallback =
      std::function<bool(const std::string& run_id, const MetricPoint& point)>;

  static absl::StatusOr<std::unique_ptr<TelemetryCore>> Create(
      TelemetryCoreOptions options);
  ~TelemetryCore();  // stores what is queued, then stops

  // INVALID_ARGUMENT (naming the field), or RESOURCE_EXHAUSTED when the
  // ingest budget is spent, without queuing; otherwise queued and `done`
  // runs later.
  absl::Status Submit(std::shared_ptr<const MetricBatch> batch,
                      DoneCallback done);

  // Writes `run_id`'s hyperparameters into its TensorBoard event file (the
  // HParams dashboard), on the TensorBoard thread; nothing without a
  // tensorboard_dir. `group_name`: the configuration its repeats share.
  void AddRunHParams(const std::string& run_id,
                     std::map<std::string, google::protobuf::Value> hparams,
                     const std::string& group_name);

  absl::StatusOr<QueryResponse> Query(const QueryRequest& request);
  ListSeriesResponse ListSeries(const ListSeriesRequest& request);
  std::vector<RunSummary> ListRuns();

  // Calls `on_point` (on the writer thread; must not block) for every stored
  // point of `request.run_id` matching its names / prefix, until it returns
  // false or RemoveWatcher. INVALID_ARGUMENT for an empty run id,
  // RESOURCE_EXHAUSTED beyond max_watchers.
  absl::StatusOr<int64_t> AddWatcher(const WatchRequest& request,
                                     PointCallback on_point);
  void RemoveWatcher(int64_t id);

  TelemetryCoreStats stats() const;

 private:
  struct Impl;
  explicit TelemetryCore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_TELEMETRY_CORE_H_
