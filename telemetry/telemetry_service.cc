#include "telemetry/telemetry_service.h"

#include <malloc.h>

#include <limits>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_message.h"
#include "common/grpc_status.h"
#include "common/latest_write.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/security.h"
#include "telemetry/watch_backlog.h"

namespace rl {
namespace {

class IngestReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `caller`: who sent the stream (the token's name, or the client's
  // address without tokens), stamped on each batch for the store's
  // per-caller limits and keying the refusal log's limiter.
  IngestReactor(TelemetryCore* core, std::unique_ptr<StreamPlace> place,
                std::string caller)
      : place_(std::move(place)), core_(core), caller_(std::move(caller)) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (!ok) {
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    if (!error_.ok()) {
      // A batch before this one was refused: the stream is ending, and this
      // one comes again (after the refused one) on the next stream.
      incoming_.Clear();
      MaybeFinishLocked();
      return;
    }
    auto batch = std::make_shared<MetricBatch>();
    if (absl::Status parsed = ParseByteBuffer(&incoming_, batch.get(), "batch");
        !parsed.ok()) {
      // Not a MetricBatch: the stream ends with why, after what came before
      // it is acknowledged; nothing after it is read.
      incoming_.Clear();
      error_ = std::move(parsed);
      refused_seq_ = std::numeric_limits<int64_t>::max();
      MaybeFinishLocked();
      return;
    }
    incoming_.Clear();
    batch->set_caller(caller_);  // the client's own value is not believed
    const int64_t seq = batch->sequence_number();
    ++in_flight_;
    absl::Status submitted = core_->Submit(
        std::move(batch), [this, seq](absl::Status s) { OnStored(seq, s); });
    if (!submitted.ok()) {
      --in_flight_;
      error_ = std::move(submitted);
      refused_seq_ = seq;
      MaybeFinishLocked();
      return;
    }
    if (in_flight_ < TelemetryServiceImpl::kMaxInFlight) {
      StartRead(&incoming_);
    } else {
      read_paused_ = true;
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    const bool more = acks_.Done();
    if (!ok) write_failed_ = true;
    if (!write_failed_ && more) WriteAckLocked();
    MaybeFinishLocked();
  }

  void OnDone() override { delete this; }

 private:
  void OnStored(int64_t seq, const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    if (s.ok()) {
      // Never past a refused batch: the client drops (or resends) the oldest
      // batch not acknowledged, which must be the refused one. A later batch
      // stored anyway is resent and then found a duplicate.
      if ((refused_seq_ == 0 || seq < refused_seq_) && seq > acked_) {
        acked_ = seq;
        if (acks_.Offer(seq) && !write_failed_) WriteAckLocked();
      }
    } else if (error_.ok()) {
      error_ = s;
      refused_seq_ = seq;
    }
    if (read_paused_ && error_.ok() && !reads_done_) {
      read_paused_ = false;
      StartRead(&incoming_);
    }
    MaybeFinishLocked();
  }

  void WriteAckLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!acks_.has_waiting()) return;
    ack_.set_acked_sequence_number(acks_.Start());
    ack_bytes_ = SerializeCopy(ack_);
    StartWrite(&ack_bytes_);
  }

  // Finishes once nothing is queued or being written: after the client's
  // last batch, or after an error (with every earlier batch acknowledged).
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || in_flight_ > 0 || acks_.writing()) return;
    if (!reads_done_ && error_.ok() && !write_failed_) return;
    if (!write_failed_ && acks_.has_waiting()) {
      WriteAckLocked();
      return;
    }
    finished_ = true;
    if (!error_.ok()) {
      // A hostile client can end streams as fast as it opens them: a few
      // lines a minute per caller.
      static LogLimiter* const limiter = new LogLimiter();
      std::string left_out;
      if (limiter->Allow(caller_, &left_out)) {
        RL_LOG_WARNING("telemetry ingest from {}: {}{}", caller_,
                       error_.ToString(), left_out);
      }
    }
    Finish(ToGrpcStatus(error_));
  }

  std::unique_ptr<StreamPlace> place_;  // given back when deleted
  TelemetryCore* core_;
  const std::string caller_;
  grpc::ByteBuffer incoming_;  // owned by the pending read
  absl::Mutex mu_;
  IngestAck ack_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer ack_bytes_ ABSL_GUARDED_BY(mu_);  // owned by the write
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // The highest batch stored; one ack in flight, the highest waiting.
  int64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  LatestWrite<int64_t> acks_ ABSL_GUARDED_BY(mu_){
      [](int64_t waiting, int64_t incoming) { return incoming > waiting; }};
  // The first batch that was refused (error_), 0 while none.
  int64_t refused_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// Hands memory freed by large watch backlogs back to the system: glibc keeps
// freed small blocks in its arenas, so without this a burst of watchers
// that fell behind leaves the server hundreds of MiB larger for good
// (bench/bounds_bench). At most once a second; malloc_trim walks the
// arenas, a few milliseconds.
void ReturnFreedMemory() {
  static std::atomic<int64_t> last_ns{0};
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t last = last_ns.load(std::memory_order_relaxed);
  if (now - last < 1000000000 ||
      !last_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    return;
  }
  malloc_trim(0);
}

class WatchReactor final : public grpc::ServerWriteReactor<MetricPoint> {
 public:
  WatchReactor(TelemetryCore* core, const WatchRequest& request,
               int64_t max_backlog_bytes, std::atomic<int64_t>* total_bytes)
      : core_(core), total_bytes_(total_bytes), backlog_(max_backlog_bytes) {
    absl::StatusOr<int64_t> id = core_->AddWatcher(
        request,
        [this](const std::string&, const MetricPoint& p) { return Offer(p); });
    absl::MutexLock lock(&mu_);
    if (!id.ok()) {
      finished_ = true;
      Finish(ToGrpcStatus(id.status()));
      return;
    }
    watcher_id_ = *id;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (finished_) return;
    if (!ok) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    if (!fell_behind_.ok()) {
      finished_ = true;
      Finish(ToGrpcStatus(fell_behind_));
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    if (!finished_ && !writing_) {
      finished_ = true;
      Finish(grpc::Status::CANCELLED);
    }
  }

  void OnDone() override {
    if (watcher_id_ != 0) core_->RemoveWatcher(watcher_id_);
    bool held_much;
    {
      absl::MutexLock lock(&mu_);
      total_bytes_->fetch_sub(backlog_.bytes(), std::memory_order_relaxed);
      held_much = backlog_.peak_bytes() >= (1 << 20) ||
                  fell_behind_.code() != absl::StatusCode::kOk;
    }
    delete this;
    if (held_much) ReturnFreedMemory();
  }

 private:
  // On the core's writer thread; false ends the watch.
  bool Offer(const MetricPoint& p) {
    absl::MutexLock lock(&mu_);
    // Ended otherwise (the client left): OnDone removes it.
    if (finished_) return true;
    const int64_t before = backlog_.bytes();
    absl::Status pushed = backlog_.Push(p);
    total_bytes_->fetch_add(backlog_.bytes() - before,
                            std::memory_order_relaxed);
    if (!pushed.ok()) {
      RL_LOG_WARNING("telemetry watch: {}", pushed.ToString());
      fell_behind_ = std::move(pushed);
      // One write at a time: with one in flight, OnWriteDone finishes.
      if (!writing_) {
        finished_ = true;
        Finish(ToGrpcStatus(fell_behind_));
      }
      return false;
    }
    if (!writing_) WriteNextLocked();
    return true;
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    const int64_t before = backlog_.bytes();
    if (!backlog_.Pop(&out_)) return;
    total_bytes_->fetch_add(backlog_.bytes() - before,
                            std::memory_order_relaxed);
    writing_ = true;
    StartWrite(&out_);
  }

  TelemetryCore* core_;
  std::atomic<int64_t>* total_bytes_;  // the service's, for /metrics
  int64_t watcher_id_ = 0;
  absl::Mutex mu_;
  WatchBacklog backlog_ ABSL_GUARDED_BY(mu_);
  MetricPoint out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // RESOURCE_EXHAUSTED once the backlog passed its bound.
  absl::Status fell_behind_ ABSL_GUARDED_BY(mu_);
};

// Finishes at once with `status`.
class RefusedIngest final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedIngest(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

StreamQuotaOptions IngestStreamQuota(const TelemetryServiceOptions& options) {
  StreamQuotaOptions quota;
  quota.max_total = options.max_ingest_streams;
  quota.max_per_client = options.max_ingest_streams_per_client;
  quota.server = "this telemetry service";
  quota.total_flag = "--max_ingest_streams";
  quota.per_client_flag = "--max_ingest_streams_per_client";
  return quota;
}

}  // namespace

TelemetryServiceImpl::TelemetryServiceImpl(
    TelemetryCore* core, TelemetryServiceOptions options,
    std::shared_ptr<const Security> security)
    : core_(core),
      security_(security != nullptr ? std::move(security)
                                    : Security::ProcessDefault()),
      options_(options),
      ingest_streams_(IngestStreamQuota(options)) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
TelemetryServiceImpl::Ingest(grpc::CallbackServerContext* context) {
  absl::StatusOr<std::unique_ptr<StreamPlace>> place =
      ingest_streams_.Take(CallerClient(*context, *security_));
  if (!place.ok()) {
    static LogLimiter* const limiter = new LogLimiter();
    std::string left_out;
    if (limiter->Allow(CallerClient(*context, *security_), &left_out)) {
      RL_LOG_WARNING("telemetry ingest refused: {}{}",
                     place.status().ToString(), left_out);
    }
    return new RefusedIngest(ToGrpcStatus(place.status()));
  }
  const std::string caller =
      security_->tokens_required()
          ? absl::StrCat("token:", CallerIdentity(*context, *security_).name)
          : absl::StrCat("client:", CallerClient(*context, *security_));
  return new IngestReactor(core_, *std::move(place), caller);
}

grpc::ServerUnaryReactor* TelemetryServiceImpl::Query(
    grpc::CallbackServerContext* context, const QueryRequest* request,
    QueryResponse* response) {
  return ReplyUnary(context, core_->Query(*request), response);
}

grpc::ServerUnaryReactor* TelemetryServiceImpl::ListSeries(
    grpc::CallbackServerContext* context, const ListSeriesRequest* request,
    ListSeriesResponse* response) {
  return ReplyUnary(
      context, absl::StatusOr<ListSeriesResponse>(core_->ListSeries(*request)),
      response);
}

grpc::ServerWriteReactor<MetricPoint>* TelemetryServiceImpl::Watch(
    grpc::CallbackServerContext* /*context*/, const WatchRequest* request) {
  return new WatchReactor(core_, *request, options_.max_watch_backlog_bytes,
                          &watch_backlog_bytes_);
}

}  // namespace rl
