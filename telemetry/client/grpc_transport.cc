#include "telemetry/client/grpc_transport.h"

#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/grpc_util.h"
#include "proto/telemetry.grpc.pb.h"

namespace rl {
namespace {

class GrpcMetricTransport : public MetricTransport {
 public:
  GrpcMetricTransport(const std::string& target,
                      std::shared_ptr<const Security> security)
      : stub_(TelemetryService::NewStub(
            CreateChannel(target, std::move(security)))) {}
  ~GrpcMetricTransport() override { Close(); }

  absl::Status Connect() override {
    Close();
    auto context = std::make_shared<grpc::ClientContext>();
    // Fail fast while the service is down; the emitter retries with backoff.
    context->set_wait_for_ready(false);
    std::shared_ptr<grpc::ClientReaderWriter<MetricBatch, IngestAck>> stream =
        stub_->Ingest(context.get());
    absl::MutexLock lock(&mu_);
    context_ = std::move(context);
    stream_ = std::move(stream);
    return absl::OkStatus();
  }

  bool Send(const MetricBatch& batch) override {
    auto stream = CurrentStream();
    return stream != nullptr && stream->Write(batch);
  }

  absl::StatusOr<int64_t> ReadAck() override {
    auto stream = CurrentStream();
    if (stream == nullptr) return absl::UnavailableError("not connected");
    IngestAck ack;
    if (stream->Read(&ack)) return ack.acked_sequence_number();
    const grpc::Status status = stream->Finish();
    if (status.ok()) return absl::UnavailableError("ingest stream ended");
    return FromGrpcStatus(status);
  }

  void Close() override {
    absl::MutexLock lock(&mu_);
    if (context_ != nullptr) context_->TryCancel();
  }

 private:
  std::shared_ptr<grpc::ClientReaderWriter<MetricBatch, IngestAck>>
  CurrentStream() {
    absl::MutexLock lock(&mu_);
    return stream_;
  }

  std::unique_ptr<TelemetryService::Stub> stub_;
  absl::Mutex mu_;
  std::shared_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<grpc::ClientReaderWriter<MetricBatch, IngestAck>> stream_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<MetricTransport> MakeGrpcMetricTransport(
    const std::string& target, std::shared_ptr<const Security> security) {
  return std::make_unique<GrpcMetricTransport>(target, std::move(security));
}

std::unique_ptr<Emitter> MakeEmitter(const std::string& target,
                                     EmitterOptions options,
                                     std::shared_ptr<const Security> security) {
  return std::make_unique<Emitter>(
      target.empty() ? nullptr
                     : MakeGrpcMetricTransport(target, std::move(security)),
      std::move(options));
}

}  // namespace rl
