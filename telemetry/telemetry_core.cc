#include "telemetry/telemetry_core.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/thread.h"
#include "telemetry/tfevents/event_file_cache.h"

namespace rl {
namespace {

struct Queued {
  std::shared_ptr<const MetricBatch> batch;
  int64_t bytes = 0;  // serialized size, for the ingest budget
  TelemetryCore::DoneCallback done;
};

struct StoredBatch {
  std::shared_ptr<const MetricBatch> batch;
  int64_t bytes = 0;
};

struct Watcher {
  WatchRequest request;
  TelemetryCore::PointCallback on_point;
};

bool Matches(const WatchRequest& w, const std::string& name) {
  if (!w.names().empty()) {
    return std::find(w.names().begin(), w.names().end(), name) !=
           w.names().end();
  }
  return absl::StartsWith(name, w.name_prefix());
}

// TensorBoard tag of a point: its name, then its labels as "/key=value" in
// key order, e.g. "actor/episode_return/actor=3".
std::string Tag(const MetricPoint& p) {
  if (p.labels().empty()) return p.name();
  std::vector<std::pair<std::string, std::string>> labels(p.labels().begin(),
                                                          p.labels().end());
  std::sort(labels.begin(), labels.end());
  std::string tag = p.name();
  for (const auto& [k, v] : labels) absl::StrAppend(&tag, "/", k, "=", v);
  return tag;
}

// Run ids become directory names: keep them to a safe alphabet.
std::string RunDirName(const std::string& run_id) {
  std::string out = run_id;
  for (char& c : out) {
    if (!(absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.')) c = '_';
  }
  if (out == "." || out == "..") out = "_";
  return out;
}

}  // namespace

struct TelemetryCore::Impl {
  TelemetryCoreOptions options;
  std::unique_ptr<MetricStore> store;

  mutable absl::Mutex mu;
  std::deque<Queued> queue ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
  TelemetryCoreStats stats ABSL_GUARDED_BY(mu);
  std::map<int64_t, Watcher> watchers ABSL_GUARDED_BY(mu);
  int64_t next_watcher ABSL_GUARDED_BY(mu) = 1;

  // TensorBoard: its own thread and queue, so event files never slow acks.
  absl::Mutex tb_mu;
  std::deque<StoredBatch> tb_queue ABSL_GUARDED_BY(tb_mu);
  int64_t tb_queue_bytes ABSL_GUARDED_BY(tb_mu) = 0;
  bool tb_stop ABSL_GUARDED_BY(tb_mu) = false;
  struct RunHParams {
    std::string run_id;
    std::map<std::string, google::protobuf::Value> hparams;
    std::string group_name;
  };
  std::deque<RunHParams> tb_hparams ABSL_GUARDED_BY(tb_mu);
  std::unique_ptr<EventFileCache> event_files;  // the TensorBoard thread's

  NamedThread writer;
  NamedThread tb_thread;

  void WriterLoop();
  void TensorBoardLoop();
  // Written once a run's HParams are on disk, under the TensorBoard
  // directory's ".hparams" (no run's directory: readers of a run's files
  // would meet it, and TensorBoard lists only directories with event files).
  std::string HParamsMarker(const std::string& run_id) const {
    return absl::StrCat(options.tensorboard_dir, "/.hparams/",
                        RunDirName(run_id));
  }
};

TelemetryCore::TelemetryCore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<TelemetryCore>> TelemetryCore::Create(
    TelemetryCoreOptions options) {
  auto impl = std::make_unique<Impl>();
  if (options.max_ingest_batches < 1 || options.max_ingest_bytes < 1 ||
      options.max_watchers < 0 || options.max_tensorboard_backlog_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "telemetry limits: max_ingest_batches ", options.max_ingest_batches,
        " and max_ingest_bytes ", options.max_ingest_bytes,
        " must be at least 1, max_watchers ", options.max_watchers,
        " and max_tensorboard_backlog_bytes ",
        options.max_tensorboard_backlog_bytes, " at least 0"));
  }
  if (!options.tensorboard_dir.empty()) {
    if (options.max_open_event_files < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("telemetry limits: max_open_event_files ",
                       options.max_open_event_files, " must be at least 1"));
    }
    EventFileCacheOptions files;
    files.root_dir = options.tensorboard_dir;
    files.max_open_files = options.max_open_event_files;
    ASSIGN_OR_RETURN(impl->event_files, EventFileCache::Create(files));
  }
  ASSIGN_OR_RETURN(impl->store,
                   MetricStore::Open(options.store_path, options.store));
  impl->options = std::move(options);
  Impl* raw = impl.get();
  impl->writer = StartThread("tel-writer", [raw] { raw->WriterLoop(); });
  if (!impl->options.tensorboard_dir.empty()) {
    impl->tb_thread =
        StartThread("tensorboard", [raw] { raw->TensorBoardLoop(); });
  }
  return std::unique_ptr<TelemetryCore>(new TelemetryCore(std::move(impl)));
}

TelemetryCore::~TelemetryCore() {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stop = true;
  }
  impl_->writer.join();
  {
    absl::MutexLock lock(&impl_->tb_mu);
    impl_->tb_stop = true;
  }
  if (impl_->tb_thread.joinable()) impl_->tb_thread.join();
}

absl::Status TelemetryCore::Submit(std::shared_ptr<const MetricBatch> batch,
                                   DoneCallback done) {
  RETURN_IF_ERROR(ValidateBatch(*batch));
  const int64_t bytes = static_cast<int64_t>(batch->ByteSizeLong());
  Impl& m = *impl_;
  absl::MutexLock lock(&m.mu);
  if (m.stop) return absl::UnavailableError("telemetry is shutting down");
  // With nothing in flight any valid batch is admitted, so one larger than
  // the byte budget is not refused for ever.
  if (m.stats.in_flight_batches > 0 &&
      (m.stats.in_flight_batches >= m.options.max_ingest_batches ||
       m.stats.in_flight_bytes + bytes > m.options.max_ingest_bytes)) {
    ++m.stats.refused_ingest_budget;
    return absl::ResourceExhaustedError(absl::StrCat(
        "telemetry ingest budget spent: ", m.stats.in_flight_batches,
        " batches (", m.stats.in_flight_bytes,
        " bytes) from all streams wait for the store, at most ",
        m.options.max_ingest_batches, " (max_ingest_batches) and ",
        m.options.max_ingest_bytes,
        " bytes (max_ingest_bytes); this batch has ", bytes,
        " bytes; resend later"));
  }
  ++m.stats.in_flight_batches;
  m.stats.in_flight_bytes += bytes;
  m.queue.push_back({std::move(batch), bytes, std::move(done)});
  return absl::OkStatus();
}

void TelemetryCore::Impl::WriterLoop() {
  absl::Time next_retention = absl::Now();
  for (;;) {
    std::vector<Queued> group;
    {
      absl::MutexLock lock(&mu);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return stop || !queue.empty();
      };
      mu.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      if (queue.empty() && stop) return;
      while (!queue.empty() &&
             static_cast<int>(group.size()) < options.max_group_batches) {
        group.push_back(std::move(queue.front()));
        queue.pop_front();
      }
    }
    if (absl::Now() >= next_retention) {
      next_retention = absl::Now() + options.retention_interval;
      absl::StatusOr<int> deleted = store->ApplyRetention(absl::Now());
      if (!deleted.ok()) {
        RL_LOG_ERROR("telemetry retention: {}", deleted.status().ToString());
      } else if (*deleted > 0) {
        RL_LOG_INFO("telemetry retention: deleted {} runs", *deleted);
      }
      absl::StatusOr<int> forgotten = store->ForgetIdleStreams(absl::Now());
      if (!forgotten.ok()) {
        RL_LOG_ERROR("telemetry retention of emitter streams: {}",
                     forgotten.status().ToString());
      } else if (*forgotten > 0) {
        RL_LOG_INFO("telemetry retention: forgot {} idle emitter streams",
                    *forgotten);
      }
    }
    if (group.empty()) continue;

    std::vector<const MetricBatch*> batches;
    for (const Queued& q : group) batches.push_back(q.batch.get());
    std::vector<absl::Status> results;
    std::vector<bool> duplicate;
    const absl::Status written = store->Write(batches, &results, &duplicate);
    if (!written.ok()) {
      RL_LOG_ERROR("telemetry store: {}", written.ToString());
      results.assign(group.size(),
                     absl::UnavailableError(
                         absl::StrCat("telemetry store: ", written.message())));
      duplicate.assign(group.size(), false);
    }
    std::vector<StoredBatch> stored;
    {
      absl::MutexLock lock(&mu);
      ++stats.transactions;
      for (size_t i = 0; i < group.size(); ++i) {
        if (!results[i].ok()) {
          ++stats.refused_batches;
        } else if (duplicate[i]) {
          ++stats.duplicate_batches;
        } else {
          ++stats.stored_batches;
          stats.stored_points += group[i].batch->points_size();
          stored.push_back({group[i].batch, group[i].bytes});
        }
      }
      for (const StoredBatch& s : stored) {
        const MetricBatch& b = *s.batch;
        for (auto it = watchers.begin(); it != watchers.end();) {
          bool keep = true;
          if (it->second.request.run_id() == b.run_id()) {
            for (const MetricPoint& p : b.points()) {
              if (Matches(it->second.request, p.name()) &&
                  !it->second.on_point(b.run_id(), p)) {
                keep = false;
                break;
              }
            }
          }
          if (keep) {
            ++it;
          } else {
            ++stats.refused_watch_backlog;
            it = watchers.erase(it);
          }
        }
      }
      const MetricStoreStats store_stats = store->stats();
      stats.refused_series_per_run = store_stats.refused_series_per_run;
      stats.refused_series_per_source = store_stats.refused_series_per_source;
      stats.refused_runs = store_stats.refused_runs;
      stats.refused_runs_per_source = store_stats.refused_runs_per_source;
    }
    for (size_t i = 0; i < group.size(); ++i) group[i].done(results[i]);
    {
      // Out of the budget only once acknowledged: a stalled acknowledgement
      // still holds its batch.
      absl::MutexLock lock(&mu);
      stats.in_flight_batches -= static_cast<int64_t>(group.size());
      for (const Queued& q : group) stats.in_flight_bytes -= q.bytes;
    }
    if (event_files != nullptr && !stored.empty()) {
      int64_t dropped = 0;
      {
        absl::MutexLock lock(&tb_mu);
        for (StoredBatch& s : stored) {
          if (!tb_queue.empty() && tb_queue_bytes + s.bytes >
                                       options.max_tensorboard_backlog_bytes) {
            dropped += s.batch->points_size();
            continue;
          }
          tb_queue_bytes += s.bytes;
          tb_queue.push_back(std::move(s));
        }
      }
      if (dropped > 0) {
        absl::MutexLock lock(&mu);
        stats.tensorboard_dropped_points += dropped;
      }
    }
  }
}

void TelemetryCore::Impl::TensorBoardLoop() {
  // A full disk fails every cycle: log it now and then, count it always.
  absl::Time next_error_log = absl::InfinitePast();
  for (;;) {
    std::deque<StoredBatch> work;
    std::deque<RunHParams> hparams;
    {
      absl::MutexLock lock(&tb_mu);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tb_mu) {
        return tb_stop || !tb_queue.empty() || !tb_hparams.empty();
      };
      tb_mu.Await(absl::Condition(&ready));
      if (tb_queue.empty() && tb_hparams.empty() && tb_stop) break;
      work.swap(tb_queue);
      tb_queue_bytes = 0;
      hparams.swap(tb_hparams);
    }
    int64_t points = 0, errors = 0;
    absl::Status first_error;
    for (const StoredBatch& s : work) {
      const MetricBatch& b = *s.batch;
      const std::string dir = RunDirName(b.run_id());
      for (int i = 0; i < b.points_size(); ++i) {
        const MetricPoint& p = b.points(i);
        const absl::Status added = event_files->AddScalar(
            dir, Tag(p), p.step(), p.wall_time_ns() * 1e-9,
            static_cast<float>(p.value()));
        if (!added.ok()) {
          // The file could not be opened or its writer failed: the rest of
          // the batch would fail alike.
          errors += b.points_size() - i;
          first_error.Update(added);
          break;
        }
        ++points;
      }
    }
    // A run's HParams are written once, across restarts too: the marker
    // beside its event files says they are on disk (the sweep's view sends
    // every trial's again after a restart, and TensorBoard showed a second
    // session of the same run).
    std::vector<std::string> marked;
    for (const RunHParams& h : hparams) {
      const std::string marker = HParamsMarker(h.run_id);
      if (std::find(marked.begin(), marked.end(), marker) != marked.end() ||
          ::access(marker.c_str(), F_OK) == 0) {
        continue;
      }
      const absl::Status added = event_files->AddHParams(
          RunDirName(h.run_id), h.hparams, h.group_name,
          absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
      if (!added.ok()) {
        ++errors;
        first_error.Update(added);
      } else {
        marked.push_back(marker);
      }
    }
    if (absl::Status flushed = event_files->Flush(); !flushed.ok()) {
      ++errors;
      first_error.Update(flushed);
    } else if (!marked.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(
          std::filesystem::path(options.tensorboard_dir) / ".hparams", ec);
      for (const std::string& marker : marked) {
        if (!std::ofstream(marker).good()) {
          ++errors;
          first_error.Update(
              absl::InternalError(absl::StrCat("cannot write ", marker)));
        }
      }
    }
    if (!first_error.ok() && absl::Now() >= next_error_log) {
      next_error_log = absl::Now() + absl::Seconds(10);
      RL_LOG_ERROR("tensorboard: {}", first_error.ToString());
    }
    absl::MutexLock lock(&mu);
    stats.tensorboard_points += points;
    stats.tensorboard_errors += errors;
    stats.open_event_files = event_files->open_files();
  }
  event_files.reset();  // flushes and closes
}

void TelemetryCore::AddRunHParams(
    const std::string& run_id,
    std::map<std::string, google::protobuf::Value> hparams,
    const std::string& group_name) {
  if (impl_->event_files == nullptr) return;
  absl::MutexLock lock(&impl_->tb_mu);
  impl_->tb_hparams.push_back(
      Impl::RunHParams{run_id, std::move(hparams), group_name});
}

absl::StatusOr<QueryResponse> TelemetryCore::Query(
    const QueryRequest& request) {
  return impl_->store->Query(request);
}

ListSeriesResponse TelemetryCore::ListSeries(const ListSeriesRequest& request) {
  ListSeriesResponse response;
  for (SeriesInfo& s :
       impl_->store->ListSeries(request.run_id(), request.name_prefix())) {
    *response.add_series() = std::move(s);
  }
  return response;
}

std::vector<RunSummary> TelemetryCore::ListRuns() {
  return impl_->store->ListRuns();
}

absl::StatusOr<int64_t> TelemetryCore::AddWatcher(const WatchRequest& request,
                                                  PointCallback on_point) {
  if (request.run_id().empty()) {
    return absl::InvalidArgumentError("request.run_id: empty");
  }
  absl::MutexLock lock(&impl_->mu);
  if (static_cast<int64_t>(impl_->watchers.size()) >=
      impl_->options.max_watchers) {
    ++impl_->stats.refused_watchers;
    return absl::ResourceExhaustedError(
        absl::StrCat("telemetry has ", impl_->watchers.size(),
                     " live watchers, at most ", impl_->options.max_watchers,
                     " (max_watchers); retry once one has ended"));
  }
  const int64_t id = impl_->next_watcher++;
  impl_->watchers[id] = {request, std::move(on_point)};
  return id;
}

void TelemetryCore::RemoveWatcher(int64_t id) {
  absl::MutexLock lock(&impl_->mu);
  impl_->watchers.erase(id);
}

TelemetryCoreStats TelemetryCore::stats() const {
  absl::MutexLock lock(&impl_->mu);
  TelemetryCoreStats s = impl_->stats;
  s.queued_batches = static_cast<int64_t>(impl_->queue.size());
  s.watchers = static_cast<int64_t>(impl_->watchers.size());
  return s;
}

}  // namespace rl
