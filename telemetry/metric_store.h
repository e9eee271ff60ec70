// Durable metric series in SQLite (WAL, synchronous=FULL). A group of
// batches is written in one transaction, so once Write returns they survive a
// crash of the process; only then does the service acknowledge them.
//
// Layout: `series` (run, name, labels) with counters, `chunks` of up to
// kChunkPoints packed 24-byte points per row (appended to while open),
// `streams` holding the last stored sequence number of every emitter stream
// (source, incarnation), and `stream_gaps` the numbers below it that are not
// stored (a batch whose write failed while a later one of its stream was
// stored; at most 64 ranges per stream), so a resent batch is stored once
// and a batch resent after a failed write is stored, never taken for a
// duplicate.
//
// One value per step: a batch with points at a step a series already has
// (a learner resumed from an earlier checkpoint emits those steps again)
// replaces the stored points at that step; the points one batch carries at
// one step are all kept (an actor's episode returns of one segment).
//
// Validation rules (ValidateBatch): run_id and source 1..128 bytes, sequence
// numbers from 1, at most kMaxPointsPerBatch points, and the points' names
// and labels within telemetry/client/metric_limits.h's limits (names
// 1..256 printable bytes, at most 16 labels with keys 1..64 and values
// 0..256 printable bytes). NaN and infinite values are stored as they are (see
// downsample.h for how buckets treat them).
#ifndef RL_TELEMETRY_METRIC_STORE_H_
#define RL_TELEMETRY_METRIC_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/telemetry.pb.h"
#include "telemetry/client/metric_limits.h"

struct sqlite3;

namespace rl {

inline constexpr int kMaxPointsPerBatch = 100000;
// Series written for the drop counts reported by emitters.
inline constexpr char kDroppedPointsSeries[] = "telemetry/dropped_points";

// INVALID_ARGUMENT naming the first bad field, e.g. "batch.points[3].name".
absl::Status ValidateBatch(const MetricBatch& batch);

struct MetricStoreOptions {
  // Oldest chunks of a series are deleted beyond this many points (0: keep
  // all; else at least kChunkPoints): a series keeps between this many
  // less a chunk and this many.
  int64_t max_points_per_series = 0;
  // A run none of whose series got a point for this long is deleted by
  // ApplyRetention (zero: keep forever).
  absl::Duration run_retention = absl::ZeroDuration();
  // What the store knows of an emitter stream (source, incarnation: which
  // sequence numbers it stored, to spot resends) is forgotten by
  // ForgetIdleStreams once no batch of it was stored for this long (zero:
  // never). Only resends of batches whose acknowledgement was lost need it,
  // and they come within a reconnect; a batch resent later still lands on
  // its steps, where points replace, not duplicate, what is stored.
  absl::Duration stream_retention = absl::Hours(24);
  // New series beyond this per run are refused (FAILED_PRECONDITION: a
  // resend is refused again, so emitters drop the batch).
  int max_series_per_run = 10000;
  // New series one source (MetricBatch.source: a process) may create since
  // this store was opened, or since ForgetIdleStreams forgot all its
  // streams; beyond it its batches with new series are refused
  // (FAILED_PRECONDITION) and counted. 0: no limit.
  int max_series_per_source = 20000;
  // New runs beyond this many are refused (FAILED_PRECONDITION); runs that
  // retention or DeleteRun deletes make room.
  int max_runs = 10000;
  // New runs one source, and one caller (MetricBatch.caller: the stream's
  // token), may each create per minute (token buckets of this size refilled
  // at this rate): beyond it their batches that would create one are
  // refused (FAILED_PRECONDITION) and counted, so one client cannot fill
  // max_runs in a second, whatever sources it names. 0: no limit.
  int max_new_runs_per_source_per_minute = 120;
  // Raw (not downsampled) queries returning more points are refused.
  int64_t max_raw_points = 200000;
  // Downsampled queries are refused where the series they select times
  // max_buckets passes this: a bucket array per series is held at once
  // (about 64 bytes a bucket), merged or not.
  int64_t max_bucket_slots = 1000000;
};

// Batches refused by a limit of MetricStoreOptions, since Open.
struct MetricStoreStats {
  int64_t refused_series_per_run = 0;
  int64_t refused_runs = 0;
  int64_t refused_series_per_source = 0;
  int64_t refused_runs_per_source = 0;
};

struct RunSummary {
  std::string run_id;
  int64_t num_series = 0;
  int64_t num_points = 0;
  int64_t last_step = 0;
  int64_t last_wall_time_ns = 0;
};

// INVALID_ARGUMENT naming each option out of its range (MetricStore::Open
// checks them): a max_points_per_series under one chunk, negative
// retentions or limits, max_runs or max_series_per_run under 1.
absl::Status CheckStoreOptions(const MetricStoreOptions& options);

class MetricStore {
 public:
  static constexpr int kChunkPoints = 1024;

  static absl::StatusOr<std::unique_ptr<MetricStore>> Open(
      const std::string& path, MetricStoreOptions options = {});
  ~MetricStore();

  // Stores `batches` (validated) in one transaction. `results[i]`: OK (stored,
  // or a duplicate of a stored batch: `duplicate[i]` true), or the reason
  // batch i alone was refused (FAILED_PRECONDITION: too many series in its
  // run, or a new run beyond max_runs). An error return means nothing was
  // stored. Points at steps already stored replace those (see the top).
  absl::Status Write(const std::vector<const MetricBatch*>& batches,
                     std::vector<absl::Status>* results,
                     std::vector<bool>* duplicate);

  // NOT_FOUND for a run with no series; INVALID_ARGUMENT for a bad request.
  absl::StatusOr<QueryResponse> Query(const QueryRequest& request);
  std::vector<SeriesInfo> ListSeries(const std::string& run_id,
                                     const std::string& name_prefix);
  std::vector<RunSummary> ListRuns();

  // Deletes runs past `run_retention` at `now`; returns how many.
  absl::StatusOr<int> ApplyRetention(absl::Time now);
  absl::Status DeleteRun(const std::string& run_id);
  // Forgets the streams past `stream_retention` at `now` (and, for sources
  // with no stream left, their count of new series); returns how many.
  absl::StatusOr<int> ForgetIdleStreams(absl::Time now);
  // Emitter streams known (stored, and not forgotten).
  int64_t num_streams();

  MetricStoreStats stats() const;

 private:
  struct Catalog;
  struct PendingWrite;
  struct RunBudget;
  using RunBudgets = std::array<RunBudget*, 2>;
  MetricStore(sqlite3* writer, sqlite3* reader, MetricStoreOptions options);
  // Write's phases (metric_store.cc), inside its transaction.
  absl::Status AdmitBatch(const MetricBatch& batch, size_t index,
                          PendingWrite& w, absl::Status* refused,
                          bool* duplicate);
  absl::Status CheckSeriesLimits(const MetricBatch& batch, int64_t fresh,
                                 PendingWrite& w, RunBudgets* budgets,
                                 bool count_refusal = true);
  absl::Status AppendPending(PendingWrite& w);
  absl::Status SaveStreams(PendingWrite& w);
  void PublishWrite(PendingWrite& w);
  absl::Status LoadCatalog();
  // Deletes a series' oldest chunks (not `open_chunk`) down to the point
  // limit; returns the points removed. Inside Write's transaction.
  absl::StatusOr<int64_t> TrimSeries(int64_t series_id, int64_t open_chunk,
                                     int64_t num_points);

  const MetricStoreOptions options_;
  absl::Mutex write_mu_;  // the writer connection
  sqlite3* writer_;
  // Atomic, so reading them never waits for a transaction.
  std::atomic<int64_t> refused_series_per_run_{0};
  std::atomic<int64_t> refused_runs_{0};
  std::atomic<int64_t> refused_series_per_source_{0};
  std::atomic<int64_t> refused_runs_per_source_{0};
  // Per source ("source:X") and per caller ("caller:Y"), the new runs it
  // may still create now (max_new_runs_per_source_per_minute) and when that
  // was computed.
  struct RunBudget {
    double tokens = 0;
    absl::Time at;
  };
  absl::flat_hash_map<std::string, RunBudget> new_runs_by_source_
      ABSL_GUARDED_BY(write_mu_);
  // New series per source since Open (committed ones).
  absl::flat_hash_map<std::string, int64_t> series_by_source_
      ABSL_GUARDED_BY(write_mu_);
  absl::Mutex read_mu_;  // the reader connection
  sqlite3* reader_;
  std::unique_ptr<Catalog> catalog_;  // guarded by its own mutex
};

}  // namespace rl

#endif  // RL_TELEMETRY_METRIC_STORE_H_
