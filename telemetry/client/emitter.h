// The metric emitter: `Emit(name, step, value, labels)` from any thread,
// never blocking. Points go into a bounded lock-free ring; when it is full
// the point is dropped and counted (the count travels with every batch and
// is stored as the series "telemetry/dropped_points"). A background thread
// drains the ring into batches (by size or interval), streams them through a
// `MetricTransport`, keeps every batch until the service acknowledges it as
// durable, and resends the unacknowledged ones, with their sequence numbers,
// after a reconnect. A batch the service refuses for good (INVALID_ARGUMENT:
// malformed; FAILED_PRECONDITION: beyond the store's runs or series) is
// dropped and counted instead; any other refusal (RESOURCE_EXHAUSTED: the
// service's shared ingest budget) is resent. No gRPC here: the transport is
// an interface (telemetry/client/grpc_transport.h has the real one).
//
// A point the service would refuse (a name with control characters, labels
// beyond telemetry/client/metric_limits.h) is dropped and counted by the
// sender, alone, never the batch it would have travelled in; batches are
// sealed at `batch_max_points` points or about 1 MiB, far under gRPC's
// 4 MiB a message.
//
// Limits, by design of the hot path: names are at most `kMaxNameBytes` bytes
// (longer ones are dropped and counted as invalid); points with labels pay
// for a lookup of their label set (~100 ns) where plain points cost a copy
// into the ring. Wall time is read from CLOCK_REALTIME_COARSE (a few
// milliseconds of resolution, a few nanoseconds to read).
#ifndef RL_TELEMETRY_CLIENT_EMITTER_H_
#define RL_TELEMETRY_CLIENT_EMITTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/telemetry.pb.h"

namespace rl {

using MetricLabelList = std::vector<std::pair<std::string, std::string>>;

// One connection to the telemetry service. Used from two threads: the
// emitter's sender calls Connect/Send/Close, its ack reader calls ReadAck.
class MetricTransport {
 public:
  virtual ~MetricTransport() = default;
  // Opens a new stream (dropping any previous one).
  virtual absl::Status Connect() = 0;
  // False if the stream is broken.
  virtual bool Send(const MetricBatch& batch) = 0;
  // Blocks for the next acknowledgement; an error status when the stream
  // ended (the server's status, or UNAVAILABLE).
  virtual absl::StatusOr<int64_t> ReadAck() = 0;
  // Ends the stream; unblocks ReadAck. Safe to call repeatedly.
  virtual void Close() = 0;
};

struct EmitterOptions {
  // Component name, e.g. "learner/0"; the stream key at the service together
  // with `incarnation` (0: a random one per emitter).
  std::string source = "unknown";
  int64_t incarnation = 0;
  // Ring capacity in points (rounded up to a power of two).
  int queue_capacity = 1 << 15;
  // Points kept awaiting acknowledgement; beyond this the ring is not
  // drained, it fills, and new points are dropped.
  int64_t max_unacked_points = 1 << 18;
  // A batch is sent when it has this many points or its oldest point is
  // `batch_interval` old.
  int batch_max_points = 4096;
  absl::Duration batch_interval = absl::Seconds(1);
  // Reconnect backoff (exponential with jitter, between these).
  absl::Duration min_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
};

struct EmitterStats {
  int64_t emitted = 0;  // accepted into the ring
  int64_t dropped = 0;  // ring full, name too long, or rejected batch
  // Batches the service refused for good (INVALID_ARGUMENT or
  // FAILED_PRECONDITION): dropped, their points counted in `dropped`.
  int64_t rejected_batches = 0;
  int64_t sent_batches = 0;  // including resends
  int64_t acked_points = 0;
  int64_t unacked_points = 0;
  int64_t acked_sequence_number = 0;
  int64_t connects = 0;
  bool connected = false;
};

class Emitter {
 public:
  static constexpr int kMaxNameBytes = 63;

  // `transport` null: a disabled emitter (Emit does nothing).
  Emitter(std::unique_ptr<MetricTransport> transport,
          EmitterOptions options = {});
  ~Emitter();  // stops the sender; call Flush first to deliver what is left
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;

  // Run the following points belong to (points keep the run that was set
  // when they were emitted). Not for the hot path (takes a lock).
  void SetRun(absl::string_view run_id);

  // Labels every later point carries (merged under a point's own labels,
  // which win on the same key), e.g. {{"rank", "1"}} for a learner rank.
  // Not for the hot path (takes a lock).
  void SetDefaultLabels(const MetricLabelList& labels);

  // Never blocks. Thread-safe.
  void Emit(absl::string_view name, int64_t step, double value);
  void Emit(absl::string_view name, int64_t step, double value,
            const MetricLabelList& labels);

  // A point of run `run_id`, whatever run is set (e.g. the coordinator's
  // figures of each run, stored with that run's own metrics). Takes a lock:
  // not for the hot path. At most kMaxRuns distinct runs per emitter; a
  // point of one more is dropped (counted).
  void EmitToRun(absl::string_view run_id, absl::string_view name, int64_t step,
                 double value);
  static constexpr size_t kMaxRuns = 1 << 16;

  // Sends what is queued now and waits until it is acknowledged, or until
  // `timeout`. DEADLINE_EXCEEDED says how many points were left.
  absl::Status Flush(absl::Duration timeout);

  bool enabled() const { return enabled_; }
  EmitterStats stats() const;

 private:
  struct Slot;
  struct State;
  // `run_index` -1: the run set by SetRun.
  void EmitInternal(absl::string_view name, int64_t step, double value,
                    uint32_t labels_id, int64_t run_index = -1);
  // The index of `run_id` in the emitter's runs (added if new; -1 when
  // kMaxRuns are known).
  int64_t InternRunLocked(const std::string& run_id);
  uint32_t InternLabels(const MetricLabelList& labels);
  void SenderLoop();
  void AckLoop(int64_t generation);

  const bool enabled_;
  std::unique_ptr<State> state_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_EMITTER_H_
