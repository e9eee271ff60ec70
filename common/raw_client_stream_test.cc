#include "common/raw_client_stream.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_message.h"
#include "common/grpc_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/learner.grpc.pb.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

// Generated (protobuf-typed) server: acks each segment; the segment with
// sequence number `fail_at` ends the stream with INVALID_ARGUMENT.
class AckingLearner final : public LearnerService::Service {
 public:
  explicit AckingLearner(int64_t fail_at = 0) : fail_at_(fail_at) {}

  grpc::Status StreamRollouts(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<RolloutAck, RolloutSegment>* stream) override {
    RolloutSegment segment;
    while (stream->Read(&segment)) {
      {
        absl::MutexLock lock(&mu_);
        received_.push_back(segment.SerializeAsString());
      }
      if (segment.sequence_number() == fail_at_) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad segment");
      }
      RolloutAck ack;
      ack.set_acked_sequence_number(segment.sequence_number());
      stream->Write(ack);
    }
    return grpc::Status::OK;
  }

  std::vector<std::string> received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }

 private:
  const int64_t fail_at_;
  absl::Mutex mu_;
  std::vector<std::string> received_ ABSL_GUARDED_BY(mu_);
};

const std::string kMethod =
    absl::StrCat("/", LearnerService::service_full_name(), "/StreamRollouts");

class RawClientStreamTest : public ::testing::Test {
 protected:
  void Start(int64_t fail_at = 0) {
    service_ = std::make_unique<AckingLearner>(fail_at);
    ServerOptions options;
    options.max_receive_message_bytes = 64 << 20;
    auto server = StartServer({service_.get()}, options);
    ASSERT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
    ChannelOptions channel_options;
    channel_options.max_send_message_bytes = 64 << 20;
    channel_ = CreateChannel(absl::StrCat("127.0.0.1:", server_.port),
                             channel_options);
  }
  void TearDown() override {
    if (server_.server) server_.server->Shutdown();
  }

  std::shared_ptr<const RolloutSegment> Segment(int64_t sequence_number) {
    auto segment = std::make_shared<RolloutSegment>();
    segment->set_sequence_number(sequence_number);
    segment->mutable_observations()->set_data(
        std::string(1 << 20, static_cast<char>(sequence_number)));
    return segment;
  }

  std::unique_ptr<AckingLearner> service_;
  RunningServer server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(RawClientStreamTest, WritesReadsAndFinishes) {
  Start();
  grpc::ClientContext context;
  RawClientStream<RolloutAck> stream(channel_, kMethod, &context);
  std::vector<std::string> sent;
  for (int64_t i = 1; i <= 3; ++i) {
    std::shared_ptr<const RolloutSegment> segment = Segment(i);
    sent.push_back(segment->SerializeAsString());
    ASSERT_TRUE(stream.Write(SerializeAliased(std::move(segment))));
    RolloutAck ack;
    ASSERT_TRUE(stream.Read(&ack));
    EXPECT_EQ(ack.acked_sequence_number(), i);
  }
  EXPECT_TRUE(stream.WritesDone());
  EXPECT_FALSE(stream.Write(SerializeAliased(Segment(4))));  // after close
  RolloutAck ack;
  EXPECT_FALSE(stream.Read(&ack));  // the server ended the stream
  EXPECT_TRUE(stream.Finish().ok());
  EXPECT_EQ(service_->received(), sent);  // the same bytes arrived
}

TEST_F(RawClientStreamTest, ServerErrorEndsReadsAndWrites) {
  Start(/*fail_at=*/2);
  grpc::ClientContext context;
  RawClientStream<RolloutAck> stream(channel_, kMethod, &context);
  RolloutAck ack;
  ASSERT_TRUE(stream.Write(SerializeAliased(Segment(1))));
  ASSERT_TRUE(stream.Read(&ack));
  ASSERT_TRUE(stream.Write(SerializeAliased(Segment(2))));
  EXPECT_FALSE(stream.Read(&ack));
  // Writes fail once the status is in (one may still be taken before).
  bool written = true;
  for (int i = 3; i < 100 && written; ++i) {
    written = stream.Write(SerializeAliased(Segment(i)));
  }
  EXPECT_FALSE(written);
  const grpc::Status status = stream.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "bad segment");
}

TEST_F(RawClientStreamTest, CancelWakesABlockedReader) {
  Start();
  grpc::ClientContext context;
  RawClientStream<RolloutAck> stream(channel_, kMethod, &context);
  bool read = true;
  std::thread reader([&] {
    RolloutAck ack;
    read = stream.Read(&ack);  // nothing was written: no ack comes
  });
  context.TryCancel();
  reader.join();
  EXPECT_FALSE(read);
  EXPECT_EQ(stream.Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(RawClientStreamTest, DestroyedUnfinishedCancels) {
  Start();
  grpc::ClientContext context;
  {
    RawClientStream<RolloutAck> stream(channel_, kMethod, &context);
    ASSERT_TRUE(stream.Write(SerializeAliased(Segment(1))));
  }  // no Finish: cancelled and waited for, not left running
  SUCCEED();
}

TEST_F(RawClientStreamTest, UnreachableServerFails) {
  Start();
  const int port = server_.port;
  server_.server->Shutdown();
  server_.server.reset();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  auto channel = CreateChannel(absl::StrCat("127.0.0.1:", port));
  RawClientStream<RolloutAck> stream(channel, kMethod, &context);
  EXPECT_FALSE(stream.Write(SerializeAliased(Segment(1))));
  EXPECT_EQ(stream.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace rl
