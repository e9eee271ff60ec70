// LearnerService in-process (no port): a policy subscription and a rollout
// stream round trip against a LearnerCore, segments written as the actor
// writes them (aliased ByteBuffers), and a malformed segment, bytes that are
// no segment and a request that is none, each ending only its own stream
// with INVALID_ARGUMENT naming the field.
#include "learner/learner_service.h"

#include <torch/types.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "common/grpc_message.h"
#include "common/grpc_util.h"
#include "common/raw_client_stream.h"
#include "common/secrets.h"
#include "common/shared_segments.h"
#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/learner_core.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"
#include "proto/learner.grpc.pb.h"
#include "testing/in_process_server.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// A segment of SmallRunSpec()'s shape (16 steps x 4 CartPole envs).
RolloutSegment Segment(int actor, int64_t seq, int64_t version) {
  Rollout r = Rollout::Allocate(16, 4, 4, 0);
  r.observations.uniform_(-0.05, 0.05);
  r.rewards.fill_(1);
  RolloutSegment s;
  EXPECT_OK(EncodeSegment(r, &s));
  s.set_run_id("small");
  s.set_actor_id(actor);
  s.set_sequence_number(seq);
  s.set_policy_version(version);
  EnvSpec* env = s.mutable_env();
  env->set_id("CartPole-v1");
  env->set_observation_size(4);
  env->set_num_discrete_actions(2);
  return s;
}

// `segment` in a slot of `shared`, and the envelope an actor sends for it
// as segment `seq` (the run and actor of SmallRunSpec's segments).
absl::StatusOr<RolloutSegment> InSlot(SharedSegmentWriter& shared,
                                      const RolloutSegment& segment,
                                      int64_t seq) {
  const std::string bytes = segment.SerializeAsString();
  ASSIGN_OR_RETURN(const SharedSlotRef slot,
                   shared.Write(seq, bytes.size(), [&](uint8_t* out) {
                     std::memcpy(out, bytes.data(), bytes.size());
                   }));
  RolloutSegment envelope;
  envelope.set_run_id("small");
  envelope.set_sequence_number(seq);
  envelope.mutable_shared()->set_slot(slot.slot);
  envelope.mutable_shared()->set_length(slot.length);
  return envelope;
}

class LearnerServiceTest : public ::testing::Test {
 protected:
  void Start(const RunSpec& spec, int max_streams = 1024,
             int max_streams_per_client = 256) {
    LearnerOptions options;
    options.spec = spec;
    options.run_id = "small";
    ASSERT_OK_AND_ASSIGN(core_, LearnerCore::Create(options));
    service_ = std::make_unique<LearnerServiceImpl>(core_, max_streams,
                                                    max_streams_per_client);
    ASSERT_OK_AND_ASSIGN(server_, StartInProcessServer({service_.get()}));
    stub_ = LearnerService::NewStub(server_.channel);
  }
  void TearDown() override {
    if (server_.server) server_.server->Shutdown();
  }

  // Reads acks until one acknowledges `seq`; false if the stream ended.
  static bool ReadAckOf(
      grpc::ClientReaderWriter<RolloutSegment, RolloutAck>& stream, int64_t seq,
      RolloutAck* ack) {
    while (stream.Read(ack)) {
      if (ack->acked_sequence_number() >= seq) return true;
    }
    return false;
  }

  LearnerStatus Status() {
    LearnerStatus status;
    auto context = ContextWithDeadline(absl::Seconds(30));
    EXPECT_TRUE(
        stub_->GetStatus(context.get(), GetLearnerStatusRequest(), &status)
            .ok());
    return status;
  }

  std::shared_ptr<LearnerCore> core_;
  std::unique_ptr<LearnerServiceImpl> service_;
  InProcessServer server_;
  std::unique_ptr<LearnerService::Stub> stub_;
};

TEST_F(LearnerServiceTest, SubscribePolicyAndStreamRolloutsRoundTrip) {
  // One segment's worth of steps: one update, whose version is the final.
  Start(SmallRunSpec("total_env_steps: 64"));

  // The latest version at once.
  SubscribePolicyRequest subscribe;
  subscribe.set_run_id("small");
  auto policy_context = ContextWithDeadline(absl::Seconds(120));
  auto policies = stub_->SubscribePolicy(policy_context.get(), subscribe);
  PolicyUpdate update;
  ASSERT_TRUE(policies->Read(&update));
  EXPECT_EQ(update.version(), 1);
  EXPECT_FALSE(update.final());
  EXPECT_GT(update.parameters_size(), 0);

  // A segment of version 1 is trained on and acknowledged.
  auto rollout_context = ContextWithDeadline(absl::Seconds(120));
  auto stream = stub_->StreamRollouts(rollout_context.get());
  ASSERT_TRUE(stream->Write(Segment(0, 1, 1)));
  RolloutAck ack;
  ASSERT_TRUE(ReadAckOf(*stream, 1, &ack));
  EXPECT_EQ(ack.acked_sequence_number(), 1);
  EXPECT_EQ(ack.latest_policy_version(), 2);
  EXPECT_EQ(ack.dropped_stale(), 0);
  ASSERT_TRUE(stream->WritesDone());
  while (stream->Read(&ack)) {
  }
  EXPECT_TRUE(stream->Finish().ok());

  // Version 2 reaches the subscriber, marked final, and the stream ends.
  int64_t last_version = 0;
  bool final = false;
  while (policies->Read(&update)) {
    last_version = update.version();
    final |= update.final();
    EXPECT_GT(update.parameters_size(), 0);
  }
  const grpc::Status subscription = policies->Finish();
  EXPECT_TRUE(subscription.ok()) << subscription.error_message();
  EXPECT_EQ(last_version, 2);
  EXPECT_TRUE(final);

  const LearnerStatus status = Status();
  EXPECT_EQ(status.run_id(), "small");
  EXPECT_EQ(status.policy_version(), 2);
  EXPECT_EQ(status.env_steps(), 64);
  EXPECT_EQ(status.segments_received(), 1);
  EXPECT_EQ(status.segments_rejected(), 0);
}

TEST_F(LearnerServiceTest, MalformedSegmentEndsOnlyItsStream) {
  Start(SmallRunSpec("resources: {num_actors: 2}"));

  // Actor 0's segment is in; in SYNC mode it waits for actor 1's.
  auto good_context = ContextWithDeadline(absl::Seconds(120));
  auto good = stub_->StreamRollouts(good_context.get());
  ASSERT_TRUE(good->Write(Segment(0, 1, 1)));
  ASSERT_TRUE(WaitFor([&] { return Status().segments_received() == 1; },
                      absl::Seconds(60)));

  // Actor 1 sends observations with a shape but no bytes.
  auto bad_context = ContextWithDeadline(absl::Seconds(120));
  auto bad = stub_->StreamRollouts(bad_context.get());
  RolloutSegment malformed = Segment(1, 1, 1);
  malformed.mutable_observations()->clear_data();
  ASSERT_TRUE(bad->Write(malformed));
  RolloutAck ack;
  while (bad->Read(&ack)) {
  }
  const grpc::Status status = bad->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("segment.observations"));

  // Actor 0's stream is unaffected: its segment is used and acknowledged
  // (actor 1 is no longer connected, so actor 0 alone completes the batch).
  ASSERT_TRUE(ReadAckOf(*good, 1, &ack));
  EXPECT_EQ(ack.latest_policy_version(), 2);
  ASSERT_TRUE(good->WritesDone());
  while (good->Read(&ack)) {
  }
  EXPECT_TRUE(good->Finish().ok());

  const LearnerStatus learner = Status();
  EXPECT_EQ(learner.segments_rejected(), 1);
  EXPECT_EQ(learner.segments_received(), 1);
  EXPECT_EQ(learner.env_steps(), 64);
}

// Bytes that are not a RolloutSegment at all (cut short inside the
// observations) end only their stream, naming the field.
TEST_F(LearnerServiceTest, UnparseableSegmentEndsOnlyItsStream) {
  Start(SmallRunSpec("resources: {num_actors: 2}"));
  auto good_context = ContextWithDeadline(absl::Seconds(120));
  auto good = stub_->StreamRollouts(good_context.get());
  ASSERT_TRUE(good->Write(Segment(0, 1, 1)));
  ASSERT_TRUE(WaitFor([&] { return Status().segments_received() == 1; },
                      absl::Seconds(60)));

  const RolloutSegment segment = Segment(1, 1, 1);
  const std::string bytes = segment.SerializeAsString();
  const std::string cut =
      bytes.substr(0, bytes.find(segment.observations().data()) + 10);
  grpc::Slice slice(cut);
  auto bad_context = ContextWithDeadline(absl::Seconds(120));
  RawClientStream<RolloutAck> bad(
      server_.channel,
      absl::StrCat("/", LearnerService::service_full_name(), "/StreamRollouts"),
      bad_context.get());
  ASSERT_TRUE(bad.Write(grpc::ByteBuffer(&slice, 1)));
  RolloutAck ack;
  while (bad.Read(&ack)) {
  }
  const grpc::Status status = bad.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("segment.observations"));

  // Actor 0's segment is used and acknowledged.
  ASSERT_TRUE(ReadAckOf(*good, 1, &ack));
  EXPECT_EQ(ack.latest_policy_version(), 2);
  ASSERT_TRUE(good->WritesDone());
  while (good->Read(&ack)) {
  }
  EXPECT_TRUE(good->Finish().ok());
  EXPECT_EQ(Status().segments_received(), 1);
  EXPECT_EQ(Status().segments_rejected(), 1);  // counted like other refusals
}

// A segment far larger than this run's segments can be is refused before
// it is parsed, counted, and ends only its own stream.
TEST_F(LearnerServiceTest, OversizedSegmentIsRefusedBeforeParsing) {
  Start(SmallRunSpec("resources: {num_actors: 1}"));
  const int64_t limit = core_->max_segment_bytes();
  EXPECT_GT(limit, Segment(0, 1, 1).ByteSizeLong());
  EXPECT_LT(limit, 8 << 20);  // sized from the run, not the 256 MiB server
  RolloutSegment huge = Segment(0, 1, 1);
  huge.mutable_observations()->mutable_data()->append(limit, '\0');
  auto context = ContextWithDeadline(absl::Seconds(120));
  auto stream = stub_->StreamRollouts(context.get());
  stream->Write(huge);
  RolloutAck ack;
  while (stream->Read(&ack)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("more than a segment of this run can be"));
  EXPECT_EQ(Status().segments_rejected(), 1);
  EXPECT_EQ(Status().segments_received(), 0);
}

// Segments written without copying their tensor bytes (as the actor does)
// arrive as the same segment.
TEST_F(LearnerServiceTest, AliasedSegmentsAreTheSameSegments) {
  Start(SmallRunSpec("total_env_steps: 64"));
  auto context = ContextWithDeadline(absl::Seconds(120));
  RawClientStream<RolloutAck> stream(
      server_.channel,
      absl::StrCat("/", LearnerService::service_full_name(), "/StreamRollouts"),
      context.get());
  ASSERT_TRUE(stream.Write(
      SerializeAliased(std::make_shared<RolloutSegment>(Segment(0, 1, 1)))));
  RolloutAck ack;
  do {
    ASSERT_TRUE(stream.Read(&ack));
  } while (ack.acked_sequence_number() < 1);
  EXPECT_EQ(ack.acked_sequence_number(), 1);
  ASSERT_TRUE(stream.WritesDone());
  while (stream.Read(&ack)) {
  }
  EXPECT_TRUE(stream.Finish().ok());
  const LearnerStatus status = Status();
  EXPECT_EQ(status.segments_received(), 1);
  EXPECT_EQ(status.segments_rejected(), 0);
  EXPECT_EQ(status.env_steps(), 64);
}

// The same-host path: a stream that offers shared memory gets acks saying
// the learner took it, and a segment in a slot is used as if its bytes had
// come on the stream.
TEST_F(LearnerServiceTest, SegmentsThroughSharedMemoryAreTheSameSegments) {
  Start(SmallRunSpec("total_env_steps: 64"));
  ASSERT_OK_AND_ASSIGN(auto shared, SharedSegmentWriter::Create({}));
  auto context = ContextWithDeadline(absl::Seconds(120));
  context->AddMetadata(kSharedSegmentsMetadata, shared->offer());
  auto stream = stub_->StreamRollouts(context.get());
  ASSERT_OK_AND_ASSIGN(const RolloutSegment envelope,
                       InSlot(*shared, Segment(0, 1, 1), 1));
  ASSERT_TRUE(stream->Write(envelope));
  RolloutAck ack;
  ASSERT_TRUE(ReadAckOf(*stream, 1, &ack));
  EXPECT_TRUE(ack.shared_memory());
  ASSERT_TRUE(stream->WritesDone());
  while (stream->Read(&ack)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
  const LearnerStatus status = Status();
  EXPECT_EQ(status.segments_received(), 1);
  EXPECT_EQ(status.env_steps(), 64);
}

// Shared memory the learner cannot open (another host) leaves the stream
// on bytes, and says so on its acks; a slot referenced on such a stream,
// or one holding another segment than its envelope names, is refused.
TEST_F(LearnerServiceTest, SharedSegmentsTheLearnerCannotUseAreRefused) {
  Start(SmallRunSpec("resources: {num_actors: 1}"));
  {
    auto context = ContextWithDeadline(absl::Seconds(120));
    // Made on another host: no such descriptor here.
    context->AddMetadata(
        kSharedSegmentsMetadata,
        absl::StrCat(getpid(), ":", std::string(32, 'b'), ":999999"));
    auto stream = stub_->StreamRollouts(context.get());
    ASSERT_TRUE(stream->Write(Segment(0, 1, 1)));
    RolloutAck ack;
    ASSERT_TRUE(ReadAckOf(*stream, 1, &ack));
    EXPECT_FALSE(ack.shared_memory());
    RolloutSegment envelope;
    envelope.set_run_id("small");
    envelope.set_sequence_number(2);
    envelope.mutable_shared()->set_length(10);
    ASSERT_TRUE(stream->Write(envelope));
    while (stream->Read(&ack)) {
    }
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                HasSubstr("segment.shared: this stream has no shared memory"));
  }
  ASSERT_OK_AND_ASSIGN(auto shared, SharedSegmentWriter::Create({}));
  auto context = ContextWithDeadline(absl::Seconds(120));
  context->AddMetadata(kSharedSegmentsMetadata, shared->offer());
  auto stream = stub_->StreamRollouts(context.get());
  ASSERT_OK_AND_ASSIGN(const RolloutSegment envelope,
                       InSlot(*shared, Segment(0, 7, 1), 2));
  ASSERT_TRUE(stream->Write(envelope));
  RolloutAck ack;
  while (stream->Read(&ack)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("holds segment 7 of actor 0, not the envelope's "
                        "segment 2"));

  // A reference with tensors beside it: they would be ignored, so refused.
  auto third_context = ContextWithDeadline(absl::Seconds(120));
  third_context->AddMetadata(kSharedSegmentsMetadata, shared->offer());
  auto third = stub_->StreamRollouts(third_context.get());
  RolloutSegment both = Segment(0, 2, 1);
  *both.mutable_shared() = envelope.shared();
  ASSERT_TRUE(third->Write(both));
  while (third->Read(&ack)) {
  }
  const grpc::Status mixed = third->Finish();
  EXPECT_EQ(mixed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(mixed.error_message(),
              HasSubstr("carries only run_id, actor_id, sequence_number and "
                        "actor_incarnation beside `shared`"));
}

// A subscription request that is not one is refused, naming the field.
TEST_F(LearnerServiceTest, UnparseableSubscriptionIsRefused) {
  Start(SmallRunSpec());
  SubscribePolicyRequest request;
  request.set_run_id("small");
  std::string bytes = request.SerializeAsString();
  bytes.back() = '\xff';  // run_id no longer UTF-8
  grpc::Slice slice(bytes);
  auto context = ContextWithDeadline(absl::Seconds(60));
  RawClientStream<PolicyUpdate> stream(
      server_.channel,
      absl::StrCat("/", LearnerService::service_full_name(),
                   "/SubscribePolicy"),
      context.get());
  ASSERT_TRUE(stream.Write(grpc::ByteBuffer(&slice, 1)));
  stream.WritesDone();
  PolicyUpdate update;
  EXPECT_FALSE(stream.Read(&update));
  const grpc::Status status = stream.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("request.run_id"));
  EXPECT_EQ(service_->open_streams(), 0);
}

// A subscriber that hangs up on an idle stream (no write in flight) ends it:
// the server then shuts down at once instead of waiting for ever.
TEST_F(LearnerServiceTest, ACancelledIdleSubscriptionEndsItsStream) {
  Start(SmallRunSpec());
  SubscribePolicyRequest subscribe;
  subscribe.set_run_id("small");
  grpc::ClientContext context;
  auto policies = stub_->SubscribePolicy(&context, subscribe);
  PolicyUpdate update;
  ASSERT_TRUE(policies->Read(&update));  // version 1; then nothing to send
  context.TryCancel();
  EXPECT_EQ(policies->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // Without the reactor finishing, Shutdown would never return (the test
  // would time out rather than fail here).
  server_.server->Shutdown();
  server_.server.reset();
}

TEST_F(LearnerServiceTest, StreamsBeyondTheLimitAreRefusedAndFreedOnLeaving) {
  Start(SmallRunSpec(), /*max_streams=*/2);
  SubscribePolicyRequest subscribe;
  subscribe.set_run_id("small");
  grpc::ClientContext c1, c2, c3, c4;
  auto p1 = stub_->SubscribePolicy(&c1, subscribe);
  auto r2 = stub_->StreamRollouts(&c2);  // counts too, even silent
  PolicyUpdate update;
  ASSERT_TRUE(p1->Read(&update));
  ASSERT_TRUE(WaitFor([&] { return service_->open_streams() == 2; },
                      absl::Seconds(30), absl::Milliseconds(10)));
  auto p3 = stub_->SubscribePolicy(&c3, subscribe);
  EXPECT_FALSE(p3->Read(&update));
  const grpc::Status refused = p3->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--max_streams"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(service_->refused_streams(), 1);
  c1.TryCancel();
  EXPECT_EQ(p1->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(WaitFor([&] { return service_->open_streams() == 1; },
                      absl::Seconds(30), absl::Milliseconds(10)));
  auto p4 = stub_->SubscribePolicy(&c4, subscribe);
  EXPECT_TRUE(p4->Read(&update));
  c4.TryCancel();
  p4->Finish();
  r2->WritesDone();
  c2.TryCancel();
  r2->Finish();
  EXPECT_TRUE(WaitFor([&] { return service_->open_streams() == 0; },
                      absl::Seconds(30), absl::Milliseconds(10)));
}

// One client (here every call: one identity, one host) gets at most its
// share of the places, whatever the server-wide limit.
TEST_F(LearnerServiceTest, OneClientGetsAtMostItsShareOfStreams) {
  Start(SmallRunSpec(), /*max_streams=*/8, /*max_streams_per_client=*/2);
  SubscribePolicyRequest subscribe;
  subscribe.set_run_id("small");
  grpc::ClientContext c1, c2, c3;
  auto p1 = stub_->SubscribePolicy(&c1, subscribe);
  auto r2 = stub_->StreamRollouts(&c2);
  PolicyUpdate update;
  ASSERT_TRUE(p1->Read(&update));
  ASSERT_TRUE(WaitFor([&] { return service_->open_streams() == 2; },
                      absl::Seconds(30), absl::Milliseconds(10)));
  auto p3 = stub_->SubscribePolicy(&c3, subscribe);
  EXPECT_FALSE(p3->Read(&update));
  const grpc::Status refused = p3->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--max_streams_per_client"),
            std::string::npos)
      << refused.error_message();
  EXPECT_EQ(service_->refused_streams_per_client(), 1);
  EXPECT_EQ(service_->refused_streams(), 0);
  c1.TryCancel();
  p1->Finish();
  r2->WritesDone();
  c2.TryCancel();
  r2->Finish();
  EXPECT_TRUE(WaitFor([&] { return service_->open_streams() == 0; },
                      absl::Seconds(30), absl::Milliseconds(10)));
}

// With a run key from the coordinator, only callers that present it feed
// the learner or get its policy; the run goes on for those that do.
TEST_F(LearnerServiceTest, RunKeyAdmitsOnlyTheRunsWorkers) {
  Start(SmallRunSpec("resources: {num_actors: 1}"));
  service_->SetCore(core_, "the-run-key");
  for (const char* presented : {"", "another-run-key"}) {
    auto context = ContextWithDeadline(absl::Seconds(60));
    if (*presented != '\0') context->AddMetadata(kRunKeyMetadata, presented);
    auto stream = stub_->StreamRollouts(context.get());
    stream->Write(Segment(0, 1, 1));
    RolloutAck ack;
    while (stream->Read(&ack)) {
    }
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << presented;
    EXPECT_THAT(status.error_message(), HasSubstr(kRunKeyMetadata));

    auto policy_context = ContextWithDeadline(absl::Seconds(60));
    if (*presented != '\0') {
      policy_context->AddMetadata(kRunKeyMetadata, presented);
    }
    auto policies =
        stub_->SubscribePolicy(policy_context.get(), SubscribePolicyRequest());
    PolicyUpdate update;
    EXPECT_FALSE(policies->Read(&update));
    EXPECT_EQ(policies->Finish().error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(Status().segments_received(), 0);

  auto context = ContextWithDeadline(absl::Seconds(120));
  context->AddMetadata(kRunKeyMetadata, "the-run-key");
  auto stream = stub_->StreamRollouts(context.get());
  ASSERT_TRUE(stream->Write(Segment(0, 1, 1)));
  EXPECT_TRUE(WaitFor([&] { return Status().segments_received() == 1; },
                      absl::Seconds(60)));
  stream->WritesDone();
  RolloutAck ack;
  while (stream->Read(&ack)) {
  }
  stream->Finish();
}

// An actor's key (ActorKey of the run key and its id, from its assignment)
// feeds the learner only as that actor: not under another id in the
// metadata, and not with another actor's segments on its stream.
TEST_F(LearnerServiceTest, AnActorsKeyStreamsOnlyAsThatActor) {
  Start(SmallRunSpec("resources: {num_actors: 2}"));
  service_->SetCore(core_, "the-run-key");
  const std::string actor0_key = ActorKey("the-run-key", 0);
  auto refused = [&](const std::string& claimed_id, int segment_actor) {
    auto context = ContextWithDeadline(absl::Seconds(60));
    context->AddMetadata(kRunKeyMetadata, actor0_key);
    context->AddMetadata(kActorIdMetadata, claimed_id);
    auto stream = stub_->StreamRollouts(context.get());
    stream->Write(Segment(segment_actor, 1, 1));
    RolloutAck ack;
    while (stream->Read(&ack)) {
    }
    return stream->Finish();
  };
  grpc::Status status = refused("1", 1);  // actor 0's key, claiming 1
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr(kRunKeyMetadata));
  status = refused("0", 1);  // actor 0's stream, actor 1's segment
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("segment.actor_id"));
  EXPECT_EQ(Status().segments_received(), 0);

  // As itself, the actor streams and follows the policy.
  auto context = ContextWithDeadline(absl::Seconds(120));
  context->AddMetadata(kRunKeyMetadata, actor0_key);
  context->AddMetadata(kActorIdMetadata, "0");
  auto stream = stub_->StreamRollouts(context.get());
  ASSERT_TRUE(stream->Write(Segment(0, 1, 1)));
  EXPECT_TRUE(WaitFor([&] { return Status().segments_received() == 1; },
                      absl::Seconds(60)));
  auto policy_context = ContextWithDeadline(absl::Seconds(60));
  policy_context->AddMetadata(kRunKeyMetadata, actor0_key);
  policy_context->AddMetadata(kActorIdMetadata, "0");
  auto policies =
      stub_->SubscribePolicy(policy_context.get(), SubscribePolicyRequest());
  PolicyUpdate update;
  EXPECT_TRUE(policies->Read(&update));
  policy_context->TryCancel();
  policies->Finish();
  stream->WritesDone();
  RolloutAck ack;
  while (stream->Read(&ack)) {
  }
  stream->Finish();
}

}  // namespace
}  // namespace rl
