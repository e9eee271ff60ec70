#include "telemetry/telemetry_core.h"

#include <algorithm>
#include <deque>
#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status.h"
#include "telemetry/tfevents/tfevents_writer.h"

namespace rl {
namespace {

struct Queued {
  std::shared_ptr<const MetricBatch> batch;
  TelemetryCore::DoneCallback done;
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
  std::deque<std::shared_ptr<const MetricBatch>> tb_queue
      ABSL_GUARDED_BY(tb_mu);
  bool tb_stop ABSL_GUARDED_BY(tb_mu) = false;
  std::map<std::string, std::unique_ptr<TfEventsWriter>> tb_writers;

  std::thread writer;
  std::thread tb_thread;

  void WriterLoop();
  void TensorBoardLoop();
};

TelemetryCore::TelemetryCore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<TelemetryCore>> TelemetryCore::Create(
    TelemetryCoreOptions options) {
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->store,
                   MetricStore::Open(options.store_path, options.store));
  impl->options = std::move(options);
  Impl* raw = impl.get();
  impl->writer = std::thread([raw] { raw->WriterLoop(); });
  if (!impl->options.tensorboard_dir.empty()) {
    impl->tb_thread = std::thread([raw] { raw->TensorBoardLoop(); });
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
  absl::MutexLock lock(&impl_->mu);
  if (impl_->stop) return absl::UnavailableError("telemetry is shutting down");
  impl_->queue.push_back({std::move(batch), std::move(done)});
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
    std::vector<std::shared_ptr<const MetricBatch>> stored;
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
          stored.push_back(group[i].batch);
        }
      }
      for (const auto& b : stored) {
        for (auto& [id, w] : watchers) {
          if (w.request.run_id() != b->run_id()) continue;
          for (const MetricPoint& p : b->points()) {
            if (Matches(w.request, p.name())) w.on_point(b->run_id(), p);
          }
        }
      }
    }
    for (size_t i = 0; i < group.size(); ++i) group[i].done(results[i]);
    if (!options.tensorboard_dir.empty() && !stored.empty()) {
      absl::MutexLock lock(&tb_mu);
      for (auto& b : stored) tb_queue.push_back(std::move(b));
    }
  }
}

void TelemetryCore::Impl::TensorBoardLoop() {
  for (;;) {
    std::deque<std::shared_ptr<const MetricBatch>> work;
    {
      absl::MutexLock lock(&tb_mu);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tb_mu) {
        return tb_stop || !tb_queue.empty();
      };
      tb_mu.Await(absl::Condition(&ready));
      if (tb_queue.empty() && tb_stop) break;
      work.swap(tb_queue);
    }
    int64_t points = 0, errors = 0;
    std::vector<TfEventsWriter*> touched;
    for (const auto& b : work) {
      auto& writer = tb_writers[b->run_id()];
      if (writer == nullptr) {
        absl::StatusOr<std::unique_ptr<TfEventsWriter>> created =
            TfEventsWriter::Create(absl::StrCat(options.tensorboard_dir, "/",
                                                RunDirName(b->run_id())));
        if (!created.ok()) {
          RL_LOG_ERROR("tensorboard: {}", created.status().ToString());
          errors += b->points_size();
          tb_writers.erase(b->run_id());
          continue;
        }
        writer = std::move(*created);
      }
      for (const MetricPoint& p : b->points()) {
        if (writer
                ->AddScalar(Tag(p), p.step(), p.wall_time_ns() * 1e-9,
                            static_cast<float>(p.value()))
                .ok()) {
          ++points;
        } else {
          ++errors;
        }
      }
      if (std::find(touched.begin(), touched.end(), writer.get()) ==
          touched.end()) {
        touched.push_back(writer.get());
      }
    }
    for (TfEventsWriter* w : touched) {
      if (!w->Flush().ok()) ++errors;
    }
    absl::MutexLock lock(&mu);
    stats.tensorboard_points += points;
    stats.tensorboard_errors += errors;
  }
  for (auto& [run, w] : tb_writers) w->Flush().IgnoreError();
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
