// TelemetryService over gRPC's callback API; the logic is TelemetryCore's.
//
// Ingest: each batch is validated and queued; the stream keeps at most
// kMaxInFlight batches queued (then stops reading, which pushes back on the
// client through flow control) and acknowledges the highest sequence number
// stored so far (acks coalesce while a write is in flight). A malformed batch
// ends the stream with INVALID_ARGUMENT naming the field, after every batch
// before it has been stored and acknowledged. Watch: a live tail with a
// bounded buffer per watcher; a watcher that falls more than
// kMaxWatchBacklog points behind loses the oldest (counted in the log).
#ifndef RL_TELEMETRY_TELEMETRY_SERVICE_H_
#define RL_TELEMETRY_TELEMETRY_SERVICE_H_

#include "proto/telemetry.grpc.pb.h"
#include "telemetry/telemetry_core.h"

namespace rl {

class TelemetryServiceImpl final : public TelemetryService::CallbackService {
 public:
  static constexpr int kMaxInFlight = 64;
  static constexpr int kMaxWatchBacklog = 100000;

  explicit TelemetryServiceImpl(TelemetryCore* core) : core_(core) {}

  grpc::ServerBidiReactor<MetricBatch, IngestAck>* Ingest(
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

 private:
  TelemetryCore* core_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_TELEMETRY_SERVICE_H_
