// A client bidi stream that writes pre-serialised requests (grpc::ByteBuffer,
// e.g. from SerializeAliased in common/grpc_message.h) and reads protobuf
// responses, with the blocking interface of grpc::ClientReaderWriter.
//
// Written by hand because gRPC's synchronous API has no ByteBuffer streams
// for a generated method; this drives a callback-API reactor from a generic
// stub instead. States: started (StartCall with one hold for the writer and
// one for the reader) -> the writer's hold goes at WritesDone or Finish, the
// reader's when a Read fails or at Finish -> OnDone (the status is in) ->
// Finish returns it.
//
// Threads, as with grpc::ClientReaderWriter: Write, WritesDone and Finish
// from one thread, Read from one other thread at a time.
#ifndef RL_COMMON_RAW_CLIENT_STREAM_H_
#define RL_COMMON_RAW_CLIENT_STREAM_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/client_callback.h"

namespace rl {

template <typename Response>
class RawClientStream final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, Response> {
 public:
  // Starts `method` ("/package.Service/Method") on `channel`. `context`
  // must outlive this stream.
  RawClientStream(const std::shared_ptr<grpc::Channel>& channel,
                  std::string method, grpc::ClientContext* context)
      : method_(std::move(method)), context_(context) {
    grpc::TemplatedGenericStub<grpc::ByteBuffer, Response> stub(channel);
    stub.PrepareBidiStreamingCall(context_, method_, grpc::StubOptions(), this);
    this->AddMultipleHolds(2);  // the writer's and the reader's
    this->StartCall();
  }

  // Cancels the call if Finish was not called, and waits for its end.
  ~RawClientStream() override {
    bool done;
    {
      absl::MutexLock lock(&mu_);
      done = done_;
    }
    if (!done) {
      context_->TryCancel();
      Finish();
    }
  }

  RawClientStream(const RawClientStream&) = delete;
  RawClientStream& operator=(const RawClientStream&) = delete;

  // Blocks until gRPC has taken `message`; false once the stream is broken
  // or writes are done. `message`'s slices may still be referenced after
  // this returns (their owners keep what they point at alive).
  bool Write(grpc::ByteBuffer message) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (writes_closed_) return false;
      write_buffer_ = std::move(message);
      write_done_ = false;
    }
    // Not under mu_: a reaction may run inline on this thread.
    this->StartWrite(&write_buffer_);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&write_done_));
    write_buffer_.Clear();
    return write_ok_;
  }

  // Half-closes the stream; false if it was broken.
  bool WritesDone() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (writes_closed_) return false;
      writes_closed_ = true;
      write_done_ = false;
    }
    this->StartWritesDone();
    bool ok;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&write_done_));
      ok = write_ok_;
    }
    this->RemoveHold();
    return ok;
  }

  // Blocks for the next response; false when there are no more (the
  // stream ended or broke, or Finish was called).
  bool Read(Response* response) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (reads_closed_) return false;
      reading_ = true;
      read_done_ = false;
    }
    this->StartRead(response);
    bool ok;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&read_done_));
      reading_ = false;
      ok = read_ok_;
      if (!ok) reads_closed_ = true;
    }
    if (!ok) this->RemoveHold();
    return ok;
  }

  // Ends writing (without half-closing) and reading unless a Read is under
  // way, then blocks until the call is over: the server's status, or
  // CANCELLED after TryCancel on the context.
  grpc::Status Finish() ABSL_LOCKS_EXCLUDED(mu_) {
    bool release_writer = false, release_reader = false;
    {
      absl::MutexLock lock(&mu_);
      if (!writes_closed_) {
        writes_closed_ = true;
        release_writer = true;
      }
      if (!reads_closed_ && !reading_) {
        reads_closed_ = true;
        release_reader = true;
      }
    }
    if (release_writer) this->RemoveHold();
    if (release_reader) this->RemoveHold();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    write_ok_ = ok;
    write_done_ = true;
  }
  void OnWritesDoneDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    OnWriteDone(ok);
  }
  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    read_ok_ = ok;
    read_done_ = true;
  }
  void OnDone(const grpc::Status& status) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

 private:
  // The generic stub keeps a pointer to the method's name for the call.
  const std::string method_;
  grpc::ClientContext* const context_;
  absl::Mutex mu_;
  grpc::ByteBuffer write_buffer_;  // the write in flight
  bool writes_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool write_done_ ABSL_GUARDED_BY(mu_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
  bool read_ok_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_COMMON_RAW_CLIENT_STREAM_H_
