#include "telemetry/telemetry_service.h"

#include <malloc.h>

#include <limits>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_message.h"
#include "common/grpc_status.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/security.h"
#include "common/stream_reactor.h"
#include "telemetry/watch_backlog.h"

namespace rl {
namespace {

// Ingest: reads batches into the core (at most kMaxInFlight unstored);
// writes the highest stored sequence number. Ends once every batch read is
// stored and acknowledged: after the client's last batch, or after a refused
// one (with every earlier batch acknowledged).
class IngestReactor final
    : public BidiStreamReactor<grpc::ByteBuffer, grpc::ByteBuffer,
                               NewestWaiting<int64_t>> {
 public:
  // `caller`: who sent the stream (the token's name, or the client's
  // address without tokens), stamped on each batch for the store's
  // per-caller limits and keying the refusal log's limiter.
  IngestReactor(TelemetryCore* core, std::unique_ptr<StreamPlace> place,
                std::string caller)
      // One ack in flight, the highest waiting.
      : BidiStreamReactor(
            NewestWaiting<int64_t>([](int64_t waiting, int64_t incoming) {
              return incoming > waiting;
            })),
        place_(std::move(place)),
        core_(core),
        caller_(std::move(caller)) {
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
    // A point without a wall time (0, proto3's unset) takes the time it
    // arrives: at 0 it made its run look decades old to retention, which
    // deleted the run on its next pass.
    const int64_t now_ns = absl::ToUnixNanos(absl::Now());
    for (MetricPoint& point : *batch->mutable_points()) {
      if (point.wall_time_ns() <= 0) point.set_wall_time_ns(now_ns);
    }
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
        SendLocked(seq);  // never full
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

  void ToMessageLocked(int64_t seq, grpc::ByteBuffer* out) override {
    ack_.set_acked_sequence_number(seq);
    *out = SerializeCopy(ack_);
  }

  void OnWriteFailedLocked() override { MaybeFinishLocked(); }

  // Once no batch is being stored: after the client's last batch, an
  // error, or a failed write. The acks still waiting are written first
  // (unless a write failed).
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ending_locked() || in_flight_ > 0) return;
    if (!reads_done_ && error_.ok() && !write_failed_locked()) return;
    FinishAfterFlushLocked(ToGrpcStatus(error_));
  }

  void OnFinishLocked(const grpc::Status&) override {
    if (error_.ok()) return;
    // A hostile client can end streams as fast as it opens them: a few
    // lines a minute per caller.
    static LogLimiter* const limiter = new LogLimiter();
    std::string left_out;
    if (limiter->Allow(caller_, &left_out)) {
      RL_LOG_WARNING("telemetry ingest from {}: {}{}", caller_,
                     error_.ToString(), left_out);
    }
  }

  std::unique_ptr<StreamPlace> place_;  // given back when deleted
  TelemetryCore* core_;
  const std::string caller_;
  grpc::ByteBuffer incoming_;  // owned by the pending read
  IngestAck ack_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  // The highest batch stored.
  int64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
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

// A Watch stream's write queue: its WatchBacklog, counted in the service's
// total for /metrics. Full (past the bound) ends the watch with
// RESOURCE_EXHAUSTED. Its memory goes back when the watch ends.
class CountedBacklog {
 public:
  using Item = MetricPoint;

  CountedBacklog(int64_t max_bytes, std::atomic<int64_t>* total_bytes)
      : backlog_(std::make_unique<WatchBacklog>(max_bytes)),
        total_bytes_(total_bytes) {}
  CountedBacklog(CountedBacklog&&) = default;

  ~CountedBacklog() {
    if (backlog_ == nullptr) return;  // moved from
    total_bytes_->fetch_sub(backlog_->bytes(), std::memory_order_relaxed);
    const bool held_much = backlog_->peak_bytes() >= (1 << 20) || overflowed_;
    backlog_.reset();
    if (held_much) ReturnFreedMemory();
  }

  absl::Status Push(const MetricPoint& point) {
    const int64_t before = backlog_->bytes();
    absl::Status pushed = backlog_->Push(point);
    total_bytes_->fetch_add(backlog_->bytes() - before,
                            std::memory_order_relaxed);
    if (!pushed.ok()) {
      RL_LOG_WARNING("telemetry watch: {}", pushed.ToString());
      overflowed_ = true;
    }
    return pushed;
  }

  bool Pop(MetricPoint* out) {
    const int64_t before = backlog_->bytes();
    if (!backlog_->Pop(out)) return false;
    total_bytes_->fetch_add(backlog_->bytes() - before,
                            std::memory_order_relaxed);
    return true;
  }

 private:
  std::unique_ptr<WatchBacklog> backlog_;
  std::atomic<int64_t>* total_bytes_;  // the service's, for /metrics
  bool overflowed_ = false;
};

// Watch: the points of the watched series as the core stores them.
class WatchReactor final
    : public StreamWriteReactor<MetricPoint, CountedBacklog> {
 public:
  WatchReactor(TelemetryCore* core, const WatchRequest& request,
               int64_t max_backlog_bytes, std::atomic<int64_t>* total_bytes)
      : StreamWriteReactor(CountedBacklog(max_backlog_bytes, total_bytes)),
        core_(core) {
    // On the core's writer thread; false (the backlog passed its bound)
    // ends the watch. A stream that ended otherwise (the client left)
    // takes true: OnStop removes it.
    absl::StatusOr<int64_t> id = core_->AddWatcher(
        request,
        [this](const std::string&, const MetricPoint& p) { return Send(p); });
    absl::MutexLock lock(&mu_);
    if (!id.ok()) {
      FinishLocked(ToGrpcStatus(id.status()));
      return;
    }
    watcher_id_ = *id;
  }

 private:
  void ToMessageLocked(MetricPoint point, MetricPoint* out) override {
    *out = std::move(point);
  }

  void OnStop() override {
    if (watcher_id_ != 0) core_->RemoveWatcher(watcher_id_);
  }

  TelemetryCore* core_;
  int64_t watcher_id_ = 0;
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
    return new RefusedStream<
        grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
        ToGrpcStatus(place.status()));
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
