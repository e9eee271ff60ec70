#include "telemetry/client/recording_transport.h"

#include <utility>

namespace rl {

std::vector<MetricPoint> SentPoints::Named(const std::string& name) {
  absl::MutexLock lock(&mu);
  std::vector<MetricPoint> out;
  for (const MetricPoint& p : points) {
    if (p.name() == name) out.push_back(p);
  }
  return out;
}

absl::Status RecordingTransport::Connect() {
  absl::MutexLock lock(&mu_);
  closed_ = false;
  return absl::OkStatus();
}

bool RecordingTransport::Send(const MetricBatch& batch) {
  {
    absl::MutexLock lock(&sent_->mu);
    for (const MetricPoint& p : batch.points()) {
      sent_->points.push_back(p);
      sent_->runs.push_back(batch.run_id());
    }
  }
  absl::MutexLock lock(&mu_);
  acks_.push_back(batch.sequence_number());
  return true;
}

absl::StatusOr<int64_t> RecordingTransport::ReadAck() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &RecordingTransport::Readable));
  if (acks_.empty()) return absl::UnavailableError("closed");
  const int64_t ack = acks_.front();
  acks_.erase(acks_.begin());
  return ack;
}

void RecordingTransport::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

}  // namespace rl
