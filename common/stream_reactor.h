// Server stream reactors over gRPC's callback API with the write side written
// once: the service queues messages from any thread -> Queue -> one write in
// flight -> OnWriteDone starts the next -> the stream finishes exactly once
// -> OnDone calls the service's OnStop (unsubscribe) and deletes the reactor.
// A service supplies only what it sends (ToMessageLocked) and when the
// stream ends (FinishOnce / FinishLocked, OnWrittenLocked).
//
// States, every change under mu_:
//   open      - Send queues; a write starts when none is in flight.
//   ending    - a finish was asked for while a write was in flight: nothing
//               more is queued; the write's OnWriteDone finishes (after
//               writing what waits, with FinishAfterFlushLocked).
//   finished  - Finish(status) was called, once; Send drops silently (the
//               source is unsubscribed in OnStop, which comes after).
//
// StreamWriteReactor<Message, Queue> (server streaming): OnCancel finishes
// CANCELLED (after the write in flight), a failed write UNAVAILABLE.
// BidiStreamReactor<Request, Message, Queue>: the service reads; a failed
// write only stops writing (the read side sees the broken stream); OnCancel
// is gRPC's (the pending read fails).
// RefusedStream<Reactor>: finishes at once with a status.
//
// A Queue has `using Item`, `absl::Status Push(Item)` (not OK: full, and the
// stream ends with that status after the write in flight) and
// `bool Pop(Item*)` (the next to write; false when none). NewestWaiting is
// the usual one; telemetry's Watch bounds a FIFO in bytes.
#ifndef RL_COMMON_STREAM_REACTOR_H_
#define RL_COMMON_STREAM_REACTOR_H_

#include <functional>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace rl {

// A queue of one for streams whose client wants the newest message, not
// every one (a run's state, a policy version, an ack): the newest waits
// behind the write in flight. Full never ends the stream: `incoming`
// replaces what waits unless `newer(waiting, incoming)` is false (default:
// always replaces).
template <typename T>
class NewestWaiting {
 public:
  using Item = T;
  using Newer = std::function<bool(const T& waiting, const T& incoming)>;

  explicit NewestWaiting(Newer newer = nullptr) : newer_(std::move(newer)) {}

  absl::Status Push(T item) {
    if (!waiting_.has_value() || newer_ == nullptr || newer_(*waiting_, item)) {
      waiting_ = std::move(item);
    }
    return absl::OkStatus();
  }

  bool Pop(T* out) {
    if (!waiting_.has_value()) return false;
    *out = std::move(*waiting_);
    waiting_.reset();
    return true;
  }

 private:
  Newer newer_;
  std::optional<T> waiting_;
};

// The write queue and lifecycle shared by both stream kinds; `Base` is
// grpc::ServerWriteReactor<Message> or grpc::ServerBidiReactor<R, Message>.
template <typename Base, typename Message, typename Queue>
class QueuedWriteReactor : public Base {
 public:
  using Item = typename Queue::Item;

  // Queues `item` and starts its write if none is in flight; any thread.
  // True also when the stream is ending (the item is dropped); false when
  // the queue is full, and the stream then ends with the queue's status.
  template <typename T>
  bool Send(T&& item) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return SendLocked(std::forward<T>(item));
  }

  // Ends the stream with `status` once the write in flight (if any) is
  // done; what waits is dropped. Later calls do nothing. Any thread.
  void FinishOnce(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    FinishLocked(status);
  }

  void OnWriteDone(bool ok) final ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      write_failed_ = true;
      OnWriteFailedLocked();
    } else if (!ending_.has_value()) {
      OnWrittenLocked(out_);
    }
    if (finished_) return;
    if (ending_.has_value()) {
      if (!flush_ || !StartNextLocked()) FinishNowLocked(*ending_);
      return;
    }
    StartNextLocked();
  }

  void OnDone() final {
    OnStop();
    delete this;
  }

 protected:
  explicit QueuedWriteReactor(Queue queue) : queue_(std::move(queue)) {}

  template <typename T>
  bool SendLocked(T&& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || ending_.has_value()) return true;
    const absl::Status pushed = queue_.Push(std::forward<T>(item));
    if (!pushed.ok()) {
      FinishLocked(ToGrpcStatus(pushed));
      return false;
    }
    StartNextLocked();
    return true;
  }

  // As FinishOnce. With no write in flight it finishes now, even over an
  // ending asked for before (a failed write's status wins).
  void FinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (writing_) {
      if (!ending_.has_value()) ending_ = status;
      return;
    }
    FinishNowLocked(status);
  }

  // Ends the stream with `status` once everything queued is written (or a
  // write failed): the last ack reaches the client before the status.
  void FinishAfterFlushLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || ending_.has_value()) return;
    ending_ = status;
    flush_ = true;
    if (!writing_ && !StartNextLocked()) FinishNowLocked(status);
  }

  bool writing_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return writing_;
  }
  // Finished, or finishing after the write in flight.
  bool ending_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ || ending_.has_value();
  }
  bool write_failed_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return write_failed_;
  }

  // The service's part. Fills `out`, the message about to be written.
  virtual void ToMessageLocked(Item item, Message* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // `written` reached the transport; may FinishLocked (e.g. the last one).
  virtual void OnWrittenLocked(const Message& written)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {}
  // A write failed; no write starts after it. Default: nothing more.
  virtual void OnWriteFailedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {}
  // Just before Finish(status), once.
  virtual void OnFinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {}
  // In OnDone, before the reactor is deleted, without mu_: unsubscribe
  // from what calls Send.
  virtual void OnStop() {}

  // Guards the queue and the states above, and the service's own write
  // state (its hooks run under it).
  absl::Mutex mu_;

 private:
  // The service finishes and writes only through the methods above.
  using Base::Finish;
  using Base::StartWrite;

  bool StartNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || write_failed_ || finished_) return false;
    Item item;
    if (!queue_.Pop(&item)) return false;
    ToMessageLocked(std::move(item), &out_);
    writing_ = true;
    Base::StartWrite(&out_);
    return true;
  }

  void FinishNowLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finished_ = true;
    OnFinishLocked(status);
    Base::Finish(status);
  }

  Queue queue_ ABSL_GUARDED_BY(mu_);
  Message out_ ABSL_GUARDED_BY(mu_);  // owned by the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // The status to finish with once the write in flight is done; with
  // flush_, once the queue is empty too.
  std::optional<grpc::Status> ending_ ABSL_GUARDED_BY(mu_);
  bool flush_ ABSL_GUARDED_BY(mu_) = false;
};

template <typename Message, typename Queue = NewestWaiting<Message>>
class StreamWriteReactor
    : public QueuedWriteReactor<grpc::ServerWriteReactor<Message>, Message,
                                Queue> {
  using Core =
      QueuedWriteReactor<grpc::ServerWriteReactor<Message>, Message, Queue>;

 public:
  // The client hung up (or the server is shutting down): an idle stream
  // must finish here, or it would hold Server::Shutdown() for ever.
  void OnCancel() final ABSL_LOCKS_EXCLUDED(this->mu_) {
    absl::MutexLock lock(&this->mu_);
    this->FinishLocked(grpc::Status::CANCELLED);
  }

 protected:
  explicit StreamWriteReactor(Queue queue = Queue()) : Core(std::move(queue)) {}

  void OnWriteFailedLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(this->mu_) {
    this->FinishLocked(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
  }
};

template <typename Request, typename Message,
          typename Queue = NewestWaiting<Message>>
class BidiStreamReactor
    : public QueuedWriteReactor<grpc::ServerBidiReactor<Request, Message>,
                                Message, Queue> {
 protected:
  explicit BidiStreamReactor(Queue queue = Queue())
      : QueuedWriteReactor<grpc::ServerBidiReactor<Request, Message>, Message,
                           Queue>(std::move(queue)) {}
};

// A stream that ends at once with `status` (refused: no run to serve, too
// many streams, a bad request). `Reactor`: any server stream reactor type.
template <typename Reactor>
class RefusedStream final : public Reactor {
 public:
  explicit RefusedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace rl

#endif  // RL_COMMON_STREAM_REACTOR_H_
