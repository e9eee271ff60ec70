// Same-host transport for large messages: a sender writes each message into
// a slot of shared memory and sends only the slot's number and length on
// its stream; the receiver, on the same host, parses the message straight
// from the slot. The sender frees a slot when the receiver has acknowledged
// the message in it. A receiver on another host (or another PID namespace)
// cannot open the slots, refuses the offer, and the stream carries the
// bytes as before.
//
//   sender                              receiver
//   SharedSegmentWriter::Create  ---->  offer() in the stream's metadata
//                                       SharedSegmentReader::Open(offer)
//                               <----   "accepted" on its acks
//   Write(seq, bytes, fill)      ---->  {slot, length} on the stream
//                                       View({slot, length}) -> bytes
//   Release(acked seq)           <----  ack
//
// Each slot is a memfd of the sender's ("rl-segments-<token>-<slot>"): a
// 64-byte header (magic, the token, the slot) and then the message. The
// receiver opens it through /proc/<pid>/fd/<fd> (same host, same PID
// namespace, same user), and checks the name, the header and the memfd's
// seal against shrinking. Both sides map the slots: the sender serialises
// into them, the receiver parses from them, no copy in between. Because a
// slot cannot shrink and the receiver checks its size before each view, a
// sender cannot make the receiver fault (SIGBUS) on a page past the end.
// Space is reserved with posix_fallocate, so memory the sender cannot get
// fails a Write (the caller sends the bytes) instead of faulting later.
// Nothing is named in the file system: nothing is left behind when either
// process dies. Core logic: no gRPC here.
#ifndef RL_COMMON_SHARED_SEGMENTS_H_
#define RL_COMMON_SHARED_SEGMENTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace rl {

// gRPC metadata key of a stream's offer (SharedSegmentWriter::offer()).
inline constexpr char kSharedSegmentsMetadata[] = "x-rl-shared-segments";

struct SharedSlotRef {
  int slot = 0;
  int64_t length = 0;
};

class SharedSegmentWriter {
 public:
  struct Options {
    // Messages in flight through shared memory at once (1-64); beyond
    // them Write says so and the caller sends the bytes.
    int slots = 4;
  };

  // INVALID_ARGUMENT for bad options; the errno's status if the memfds
  // cannot be made.
  static absl::StatusOr<std::unique_ptr<SharedSegmentWriter>> Create(
      const Options& options);
  // Unmaps and closes every slot.
  ~SharedSegmentWriter();
  SharedSegmentWriter(const SharedSegmentWriter&) = delete;
  SharedSegmentWriter& operator=(const SharedSegmentWriter&) = delete;

  // "<pid>:<token>:<fd>,<fd>,...", what SharedSegmentReader::Open takes.
  const std::string& offer() const { return offer_; }

  // Puts a message of `bytes` bytes in a free slot, kept for
  // `sequence_number` until Release: `fill` writes the bytes at the pointer
  // it is given. RESOURCE_EXHAUSTED when every slot is taken or the memory
  // cannot be reserved (nothing is written then; send the bytes).
  // Thread-safe.
  absl::StatusOr<SharedSlotRef> Write(
      int64_t sequence_number, int64_t bytes,
      const std::function<void(uint8_t*)>& fill);

  // Frees the slots of sequence numbers <= `acked_sequence_number`.
  // Thread-safe.
  void Release(int64_t acked_sequence_number);

  int free_slots() const;

 private:
  struct Slot {
    int fd = -1;
    uint8_t* map = nullptr;
    int64_t mapped = 0;  // bytes mapped, header included
    int64_t sequence_number = 0;
    bool busy = false;
  };
  explicit SharedSegmentWriter(int slots);
  absl::Status Grow(int index, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string offer_;
  mutable absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
};

class SharedSegmentReader {
 public:
  // Opens the slots an offer names, if they are what a SharedSegmentWriter
  // made (memfd name, header, seal). Refuses with INVALID_ARGUMENT (a
  // malformed offer, or a slot that is not the offer's) or NOT_FOUND (no
  // such process or descriptor: the sender is on another host, or in
  // another PID namespace); the message says why. Messages longer than
  // `max_length` (at most 2^31 - 1: what protobuf parses) are refused by
  // View, and no more than that of a slot is ever mapped.
  static absl::StatusOr<std::unique_ptr<SharedSegmentReader>> Open(
      absl::string_view offer, int64_t max_length);
  ~SharedSegmentReader();
  SharedSegmentReader(const SharedSegmentReader&) = delete;
  SharedSegmentReader& operator=(const SharedSegmentReader&) = delete;

  // The message in `ref`, in place: valid until the next View of that slot
  // or the reader's end (the sender must not reuse the slot meanwhile, which
  // it does not before the acknowledgement). INVALID_ARGUMENT naming
  // `<what>.slot` or `<what>.length` for a slot out of range, a length
  // beyond max_length or beyond what the slot holds. One caller at a time.
  absl::StatusOr<absl::string_view> View(const SharedSlotRef& ref,
                                         absl::string_view what = "shared");

  // "process <pid>", for logs (the offer's token stays out of them).
  const std::string& name() const { return name_; }
  int slots() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    int fd = -1;
    const uint8_t* map = nullptr;
    int64_t mapped = 0;
  };
  SharedSegmentReader(std::string name, std::vector<Slot> slots,
                      int64_t max_length);

  const std::string name_;
  std::vector<Slot> slots_;
  const int64_t max_length_;
};

}  // namespace rl

#endif  // RL_COMMON_SHARED_SEGMENTS_H_
