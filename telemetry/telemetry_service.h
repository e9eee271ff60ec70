// TelemetryService over gRPC's callback API; the logic is TelemetryCore's.
//
// Ingest: each batch is validated and queued; the stream keeps at most
// kMaxInFlight batches queued (then stops reading, which pushes back on the
// client through flow control) and acknowledges the highest sequence number
// stored so far (acks coalesce while a write is in flight). A malformed batch
// ends the stream with INVALID_ARGUMENT naming the field, a batch the store
// refuses for good (a new run beyond max_runs, a new series beyond
// max_series_per_run) with FAILED_PRECONDITION (the emitter drops both), a
// batch beyond the core's ingest budget (shared by all streams) with
// RESOURCE_EXHAUSTED (the emitter resends it), each after every batch before
// it has been stored and acknowledged; no batch after it is acknowledged.
//
// Watch: a live tail. States: registered with the core (refused with
// RESOURCE_EXHAUSTED beyond max_watchers) -> writing points from its
// WatchBacklog, one write at a time -> finished: by the client leaving, by a
// failed write, or with RESOURCE_EXHAUSTED once the points the client has
// not read pass max_watch_backlog_bytes (the backlog is freed then, the
// status is sent after the write in flight) -> done: removed from the core,
// reactor deleted.
#ifndef RL_TELEMETRY_TELEMETRY_SERVICE_H_
#define RL_TELEMETRY_TELEMETRY_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/security.h"
#include "common/stream_quota.h"
#include "proto/telemetry.grpc.pb.h"
#include "telemetry/telemetry_core.h"

namespace rl {

struct TelemetryServiceOptions {
  // Bytes of points (see WatchBacklog) a Watch stream may hold for a client
  // that does not read them; beyond, the stream ends (RESOURCE_EXHAUSTED).
  int64_t max_watch_backlog_bytes = int64_t{4} << 20;
  // Ingest streams open at once, and of those from one client (identity
  // and host: CallerClient); more are refused with RESOURCE_EXHAUSTED.
  // A process's emitter holds one.
  int max_ingest_streams = 4096;
  int max_ingest_streams_per_client = 1024;
};

// Ingest takes raw bytes, so that bytes that are no MetricBatch end the
// stream with INVALID_ARGUMENT naming what is wrong (gRPC's typed reader
// would take them for the client's end of the stream and finish OK).
using TelemetryServiceBase = TelemetryService::WithRawCallbackMethod_Ingest<
    TelemetryService::WithCallbackMethod_Query<
        TelemetryService::WithCallbackMethod_ListSeries<
            TelemetryService::WithCallbackMethod_Watch<
                TelemetryService::Service>>>>;

class TelemetryServiceImpl final : public TelemetryServiceBase {
 public:
  static constexpr int kMaxInFlight = 64;

  // Callers are identified by `security`'s tokens (null: the process
  // default), per call.
  explicit TelemetryServiceImpl(
      TelemetryCore* core, TelemetryServiceOptions options = {},
      std::shared_ptr<const Security> security = nullptr);

  // MetricBatch in, IngestAck out.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Ingest(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Query(grpc::CallbackServerContext* context,
                                  const QueryRequest* request,
                                  QueryResponse* response) override;
  grpc::ServerUnaryReactor* ListSeries(grpc::CallbackServerContext* context,
                                       const ListSeriesRequest* request,
                                       ListSeriesResponse* response) override;
  grpc::ServerWriteReactor<MetricPoint>* Watch(
      grpc::CallbackServerContext* context,
      const WatchRequest* request) override;

  int open_ingest_streams() const { return ingest_streams_.open(); }
  // Ingest streams refused: the service was full / the client had its share.
  int64_t refused_ingest_streams() const {
    return ingest_streams_.refused_total();
  }
  int64_t refused_ingest_streams_per_client() const {
    return ingest_streams_.refused_per_client();
  }

  // Bytes queued for all Watch clients now.
  int64_t watch_backlog_bytes() const {
    return watch_backlog_bytes_.load(std::memory_order_relaxed);
  }

 private:
  TelemetryCore* core_;
  const std::shared_ptr<const Security> security_;
  const TelemetryServiceOptions options_;
  StreamQuota ingest_streams_;
  std::atomic<int64_t> watch_backlog_bytes_{0};
};

}  // namespace rl

#endif  // RL_TELEMETRY_TELEMETRY_SERVICE_H_
