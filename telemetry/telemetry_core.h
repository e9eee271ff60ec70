// The telemetry service's logic without gRPC: validated batches go through
// one writer thread that stores them in groups (one SQLite transaction per
// group, so many small batches share one fsync), then reports each batch's
// outcome (the service acknowledges only after that), feeds live watchers,
// and hands the points to TensorBoard event files on a thread of their own.
#ifndef RL_TELEMETRY_TELEMETRY_CORE_H_
#define RL_TELEMETRY_TELEMETRY_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
};

class TelemetryCore {
 public:
  // Runs on the writer thread once the batch is durable (OK, also for a
  // resent duplicate) or refused; must not block.
  using DoneCallback = std::function<void(absl::Status)>;
  using PointCallback =
      std::function<void(const std::string& run_id, const MetricPoint& point)>;

  static absl::StatusOr<std::unique_ptr<TelemetryCore>> Create(
      TelemetryCoreOptions options);
  ~TelemetryCore();  // stores what is queued, then stops

  // INVALID_ARGUMENT (naming the field) without queuing; otherwise queued and
  // `done` runs later.
  absl::Status Submit(std::shared_ptr<const MetricBatch> batch,
                      DoneCallback done);

  absl::StatusOr<QueryResponse> Query(const QueryRequest& request);
  ListSeriesResponse ListSeries(const ListSeriesRequest& request);
  std::vector<RunSummary> ListRuns();

  // Calls `on_point` (on the writer thread; must not block) for every stored
  // point of `request.run_id` matching its names / prefix. INVALID_ARGUMENT
  // for an empty run id.
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
