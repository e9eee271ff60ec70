// The write side of a gRPC server stream whose client wants the newest
// message, not every one (a run's state, a policy version, an ack): one
// write in flight, and the newest message waiting behind it. The reactors
// of RunService.WatchRun and LearnerService's rollout and policy streams
// write through it. Not thread-safe: the reactor's lock guards every call.
//
//   void Offer(Run run) {                          // under mu_
//     if (!finished_ && slot_.Offer(std::move(run))) WriteLocked();
//   }
//   void WriteLocked() { out_ = slot_.Start(); StartWrite(&out_); }
//   void OnWriteDone(bool ok) override {           // takes mu_
//     if (slot_.Done() && ok && !finished_) WriteLocked();
//   }
#ifndef RL_COMMON_LATEST_WRITE_H_
#define RL_COMMON_LATEST_WRITE_H_

#include <functional>
#include <optional>
#include <utility>

namespace rl {

template <typename T>
class LatestWrite {
 public:
  // Says whether `incoming` replaces `waiting` (default: always).
  using Newer = std::function<bool(const T& waiting, const T& incoming)>;

  explicit LatestWrite(Newer newer = nullptr) : newer_(std::move(newer)) {}

  // `message` waits, replacing what waited unless that is newer. True when
  // the reactor is to start a write now (Start): none is in flight.
  bool Offer(T message) {
    if (!waiting_.has_value() || newer_ == nullptr ||
        newer_(*waiting_, message)) {
      waiting_ = std::move(message);
    }
    return !writing_;
  }

  // The message to write now (taken out of the slot); a write is in flight
  // until Done. Only with a message waiting.
  T Start() {
    writing_ = true;
    T next = std::move(*waiting_);
    waiting_.reset();
    return next;
  }

  // The write in flight ended; true when a message waits (Start it, if the
  // stream goes on).
  bool Done() {
    writing_ = false;
    return waiting_.has_value();
  }

  bool writing() const { return writing_; }
  bool has_waiting() const { return waiting_.has_value(); }

 private:
  const Newer newer_;
  bool writing_ = false;
  std::optional<T> waiting_;
};

}  // namespace rl

#endif  // RL_COMMON_LATEST_WRITE_H_
