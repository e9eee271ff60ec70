#include "common/stream_reactor.h"

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc_message.h"
#include "common/raw_client_stream.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/learner.grpc.pb.h"
#include "testing/in_process_server.h"
#include "testing/status_matchers.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

Run RunOf(int64_t generation) {
  Run run;
  run.set_generation(generation);
  return run;
}

// A FIFO of at most `max` runs; a Push past that is RESOURCE_EXHAUSTED.
class BoundedFifo {
 public:
  using Item = Run;
  explicit BoundedFifo(size_t max) : max_(max) {}

  absl::Status Push(Run run) {
    if (runs_.size() >= max_) return absl::ResourceExhaustedError("full");
    runs_.push_back(std::move(run));
    return absl::OkStatus();
  }
  bool Pop(Run* out) {
    if (runs_.empty()) return false;
    *out = std::move(runs_.front());
    runs_.pop_front();
    return true;
  }

 private:
  const size_t max_;
  std::deque<Run> runs_;
};

// What the test sees of the live reactor, and what outlives it. Lock order:
// `mu`, then the reactor's.
struct Probe {
  absl::Mutex mu;
  // Sends a burst under the reactor's lock (no write completes in between)
  // and returns each Send's status; null once the reactor stopped.
  std::function<std::vector<bool>(std::vector<rl::Run>)> send
      ABSL_GUARDED_BY(mu);
  std::function<void(grpc::Status)> finish ABSL_GUARDED_BY(mu);
  std::function<bool()> idle ABSL_GUARDED_BY(mu);
  std::atomic<int> finishes{0};
  std::atomic<int> finished_code{-1};
  std::atomic<int> stops{0};

  bool live() {
    absl::MutexLock lock(&mu);
    return send != nullptr;
  }
  std::vector<bool> Send(std::vector<rl::Run> runs) {
    absl::MutexLock lock(&mu);
    return send(std::move(runs));
  }
  void Finish(const grpc::Status& status) {
    absl::MutexLock lock(&mu);
    finish(status);
  }
  bool Idle() {
    absl::MutexLock lock(&mu);
    return idle();
  }
};

template <typename Queue>
class ProbedWatch final : public StreamWriteReactor<RunEvent, Queue> {
 public:
  ProbedWatch(Queue queue, Probe* probe)
      : StreamWriteReactor<RunEvent, Queue>(std::move(queue)), probe_(probe) {
    absl::MutexLock lock(&probe_->mu);
    probe_->send = [this](std::vector<rl::Run> runs) {
      absl::MutexLock lock(&this->mu_);
      std::vector<bool> sent;
      for (rl::Run& run : runs)
        sent.push_back(this->SendLocked(std::move(run)));
      return sent;
    };
    probe_->finish = [this](grpc::Status status) { this->FinishOnce(status); };
    probe_->idle = [this] {
      absl::MutexLock lock(&this->mu_);
      return !this->writing_locked();
    };
  }

 private:
  void ToMessageLocked(Run run, RunEvent* out) override {
    *out->mutable_run() = std::move(run);
  }
  void OnFinishLocked(const grpc::Status& status) override {
    probe_->finishes.fetch_add(1);
    probe_->finished_code.store(status.error_code());
  }
  void OnStop() override {
    {
      absl::MutexLock lock(&probe_->mu);
      probe_->send = nullptr;
      probe_->finish = nullptr;
      probe_->idle = nullptr;
    }
    probe_->stops.fetch_add(1);
  }

  Probe* const probe_;
};

class WatchService final : public RunService::CallbackService {
 public:
  std::function<grpc::ServerWriteReactor<RunEvent>*()> make;

  grpc::ServerWriteReactor<RunEvent>* WatchRun(
      grpc::CallbackServerContext*, const WatchRunRequest*) override {
    return make();
  }
};

class StreamWriteReactorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_, StartInProcessServer({&service_}));
    stub_ = RunService::NewStub(server_.channel);
  }
  void TearDown() override { server_.server->Shutdown(); }

  std::unique_ptr<grpc::ClientReader<RunEvent>> Watch(
      grpc::ClientContext* context) {
    auto reader = stub_->WatchRun(context, WatchRunRequest());
    EXPECT_TRUE(WaitFor([&] { return probe_.live(); }, kWait));
    return reader;
  }

  Probe probe_;
  WatchService service_;
  InProcessServer server_;
  std::unique_ptr<RunService::Stub> stub_;
};

TEST_F(StreamWriteReactorTest, WritesArriveInOrder) {
  service_.make = [this] {
    return new ProbedWatch<BoundedFifo>(BoundedFifo(1000), &probe_);
  };
  grpc::ClientContext context;
  auto reader = Watch(&context);
  // One at a time from this thread, racing the writes of those before.
  for (int i = 1; i <= 200; ++i) {
    EXPECT_THAT(probe_.Send({RunOf(i)}), ::testing::ElementsAre(true));
  }
  RunEvent event;
  for (int i = 1; i <= 200; ++i) {
    ASSERT_TRUE(reader->Read(&event));
    EXPECT_EQ(event.run().generation(), i);
  }
  probe_.Finish(grpc::Status::OK);
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(WaitFor([this] { return probe_.stops.load() == 1; }, kWait));
  EXPECT_EQ(probe_.finishes.load(), 1);
}

TEST_F(StreamWriteReactorTest, CancelOfAnIdleStreamFinishesOnceAndStops) {
  service_.make = [this] {
    return new ProbedWatch<BoundedFifo>(BoundedFifo(10), &probe_);
  };
  grpc::ClientContext context;
  auto reader = Watch(&context);
  probe_.Send({RunOf(1)});
  RunEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(WaitFor([this] { return probe_.Idle(); }, kWait));
  context.TryCancel();
  ASSERT_TRUE(WaitFor([this] { return probe_.stops.load() == 1; }, kWait));
  EXPECT_EQ(probe_.finishes.load(), 1);
  EXPECT_EQ(probe_.finished_code.load(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(StreamWriteReactorTest, CancelWithWritesQueuedFinishesOnceAndStops) {
  service_.make = [this] {
    return new ProbedWatch<BoundedFifo>(BoundedFifo(1000), &probe_);
  };
  grpc::ClientContext context;
  auto reader = Watch(&context);
  std::vector<rl::Run> runs;
  for (int i = 1; i <= 1000; ++i) runs.push_back(RunOf(i));
  probe_.Send(std::move(runs));
  RunEvent event;
  ASSERT_TRUE(reader->Read(&event));
  context.TryCancel();
  ASSERT_TRUE(WaitFor([this] { return probe_.stops.load() == 1; }, kWait));
  EXPECT_EQ(probe_.finishes.load(), 1);
  // CANCELLED, or UNAVAILABLE when the write in flight failed.
  EXPECT_THAT(probe_.finished_code.load(),
              ::testing::AnyOf(grpc::StatusCode::CANCELLED,
                               grpc::StatusCode::UNAVAILABLE));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(StreamWriteReactorTest, FullQueueEndsTheStreamAfterTheWriteInFlight) {
  service_.make = [this] {
    return new ProbedWatch<BoundedFifo>(BoundedFifo(2), &probe_);
  };
  grpc::ClientContext context;
  auto reader = Watch(&context);
  // 1 is written at once; 2 and 3 fill the queue; 4 does not fit, and the
  // stream ends with the queue's status once 1 is written; 5 is dropped.
  const std::vector<bool> sent =
      probe_.Send({RunOf(1), RunOf(2), RunOf(3), RunOf(4), RunOf(5)});
  EXPECT_THAT(sent, ::testing::ElementsAre(true, true, true, false, true));
  RunEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.run().generation(), 1);
  EXPECT_FALSE(reader->Read(&event));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(), "full");
  ASSERT_TRUE(WaitFor([this] { return probe_.stops.load() == 1; }, kWait));
  EXPECT_EQ(probe_.finishes.load(), 1);
}

TEST_F(StreamWriteReactorTest, NewestWaitingKeepsTheNewer) {
  service_.make = [this] {
    return new ProbedWatch<NewestWaiting<rl::Run>>(
        NewestWaiting<rl::Run>(
            [](const rl::Run& waiting, const rl::Run& incoming) {
              return incoming.generation() >= waiting.generation();
            }),
        &probe_);
  };
  grpc::ClientContext context;
  auto reader = Watch(&context);
  // 1 is written at once; 3 waits; 2 is older than 3 and is dropped.
  EXPECT_THAT(probe_.Send({RunOf(1), RunOf(3), RunOf(2)}),
              ::testing::Each(true));
  RunEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.run().generation(), 1);
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.run().generation(), 3);
  ASSERT_TRUE(WaitFor([this] { return probe_.Idle(); }, kWait));
  probe_.Finish(grpc::Status(grpc::StatusCode::ABORTED, "done"));
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::ABORTED);
  ASSERT_TRUE(WaitFor([this] { return probe_.stops.load() == 1; }, kWait));
  EXPECT_EQ(probe_.finishes.load(), 1);
}

TEST_F(StreamWriteReactorTest, RefusalReturnsItsStatus) {
  service_.make = [] {
    return new RefusedStream<grpc::ServerWriteReactor<RunEvent>>(grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED, "not for this caller"));
  };
  grpc::ClientContext context;
  auto reader = stub_->WatchRun(&context, WatchRunRequest());
  RunEvent event;
  EXPECT_FALSE(reader->Read(&event));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), "not for this caller");
}

// Bidi: acks the highest sequence number read (newest waiting); at the
// client's end of writes it finishes after the last ack is written.
class AckingStream final
    : public BidiStreamReactor<grpc::ByteBuffer, grpc::ByteBuffer,
                               NewestWaiting<int64_t>> {
 public:
  explicit AckingStream(std::atomic<int>* stops)
      : BidiStreamReactor(
            NewestWaiting<int64_t>([](int64_t waiting, int64_t incoming) {
              return incoming > waiting;
            })),
        stops_(stops) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (!ok) {
      FinishAfterFlushLocked(grpc::Status::OK);
      return;
    }
    RolloutSegment segment;
    if (!ParseByteBuffer(&incoming_, &segment, "segment").ok()) {
      FinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad"));
      return;
    }
    incoming_.Clear();
    SendLocked(segment.sequence_number());  // never full
    StartRead(&incoming_);
  }

 private:
  void ToMessageLocked(int64_t sequence, grpc::ByteBuffer* out) override {
    RolloutAck ack;
    ack.set_acked_sequence_number(sequence);
    *out = SerializeCopy(ack);
  }
  void OnStop() override { stops_->fetch_add(1); }

  std::atomic<int>* const stops_;
  grpc::ByteBuffer incoming_;
};

class AckingService final
    : public LearnerService::WithRawCallbackMethod_StreamRollouts<
          LearnerService::Service> {
 public:
  std::atomic<int> stops{0};

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StreamRollouts(
      grpc::CallbackServerContext*) override {
    return new AckingStream(&stops);
  }
};

TEST(BidiStreamReactorTest, TheLastAckArrivesBeforeTheStatus) {
  AckingService service;
  ASSERT_OK_AND_ASSIGN(InProcessServer server,
                       StartInProcessServer({&service}));
  grpc::ClientContext context;
  {
    RawClientStream<RolloutAck> stream(server.channel,
                                       std::string("/") +
                                           LearnerService::service_full_name() +
                                           "/StreamRollouts",
                                       &context);
    for (int i = 1; i <= 100; ++i) {
      RolloutSegment segment;
      segment.set_sequence_number(i);
      ASSERT_TRUE(stream.Write(SerializeCopy(segment)));
    }
    ASSERT_TRUE(stream.WritesDone());
    RolloutAck ack;
    int64_t last = 0;
    while (stream.Read(&ack)) {
      EXPECT_GT(ack.acked_sequence_number(), last);  // newest only, in order
      last = ack.acked_sequence_number();
    }
    EXPECT_EQ(last, 100);
    EXPECT_TRUE(stream.Finish().ok());
  }
  EXPECT_TRUE(WaitFor([&] { return service.stops.load() == 1; }, kWait));
  server.server->Shutdown();
}

TEST(BidiStreamReactorTest, RefusalReturnsItsStatus) {
  class Refusing final
      : public LearnerService::WithRawCallbackMethod_StreamRollouts<
            LearnerService::Service> {
    grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StreamRollouts(
        grpc::CallbackServerContext*) override {
      return new RefusedStream<
          grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "no run"));
    }
  } service;
  ASSERT_OK_AND_ASSIGN(InProcessServer server,
                       StartInProcessServer({&service}));
  grpc::ClientContext context;
  RawClientStream<RolloutAck> stream(server.channel,
                                     std::string("/") +
                                         LearnerService::service_full_name() +
                                         "/StreamRollouts",
                                     &context);
  RolloutAck ack;
  EXPECT_FALSE(stream.Read(&ack));
  const grpc::Status status = stream.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "no run");
  server.server->Shutdown();
}

}  // namespace
}  // namespace rl
