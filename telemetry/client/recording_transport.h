// A metric transport for tests: records every point an Emitter sends (with
// its batch's run) and acknowledges each batch at once.
#ifndef RL_TELEMETRY_CLIENT_RECORDING_TRANSPORT_H_
#define RL_TELEMETRY_CLIENT_RECORDING_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "proto/telemetry.pb.h"
#include "telemetry/client/emitter.h"

namespace rl {

// What the transport saw; shared with the test, which reads it under `mu`.
struct SentPoints {
  absl::Mutex mu;
  std::vector<MetricPoint> points ABSL_GUARDED_BY(mu);
  std::vector<std::string> runs ABSL_GUARDED_BY(mu);  // one per point

  // The points named `name`, in the order sent.
  std::vector<MetricPoint> Named(const std::string& name);
};

class RecordingTransport : public MetricTransport {
 public:
  explicit RecordingTransport(std::shared_ptr<SentPoints> sent)
      : sent_(std::move(sent)) {}

  absl::Status Connect() override;
  bool Send(const MetricBatch& batch) override;
  absl::StatusOr<int64_t> ReadAck() override;
  void Close() override;

 private:
  bool Readable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !acks_.empty();
  }

  const std::shared_ptr<SentPoints> sent_;
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> acks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_RECORDING_TRANSPORT_H_
