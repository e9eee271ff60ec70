// ActorClient against an in-process fake learner (a sync-API
// LearnerService): policy delivery, segments and their sequence numbers,
// SYNC-mode waiting, reconnection with resends, stop on the final policy,
// and giving up when no learner can be reached.
#include "actor/actor_client.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/grpc_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/actor_critic.h"
#include "policy/policy_codec.h"
#include "policy/segment_codec.h"
#include "proto/learner.grpc.pb.h"
#include "runspec/run_spec.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(60);

RunSpec CartPoleRun(const std::string& mode) {
  auto spec = LoadRunSpec(absl::StrCat(R"(
name: actor-test
env: {id: CartPole-v1}
envs_per_actor: 4
segment_length: 8
total_env_steps: 100000
seed: 7
ppo: {num_minibatches: 1}
policy: {hidden_sizes: [16]}
sync_mode: )",
                                       mode, "\n"),
                          RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

ActorCriticConfig CartPolePolicyConfig() {
  ActorCriticConfig config;
  config.observation_size = 4;
  config.num_actions = 2;
  config.hidden_sizes = {16};
  return config;
}

SegmentShape CartPoleShape() {
  SegmentShape shape;
  shape.env.set_id("CartPole-v1");
  shape.env.set_max_episode_steps(500);
  shape.env.set_observation_size(4);
  shape.env.set_num_discrete_actions(2);
  shape.num_steps = 8;
  shape.num_envs = 4;
  return shape;
}

// Records every segment; acks (when enabled) the highest contiguous sequence
// number received on this learner; serves the latest published policy.
class FakeLearner final : public LearnerService::Service {
 public:
  void Publish(int64_t version, bool final = false) {
    torch::manual_seed(version);
    ActorCritic policy(CartPolePolicyConfig());
    PolicyUpdate update;
    ASSERT_TRUE(EncodePolicy(policy, &update).ok());
    update.set_version(version);
    update.set_final(final);
    absl::MutexLock lock(&mu_);
    latest_ = update;
  }

  void SetAcks(bool enabled) {
    absl::MutexLock lock(&mu_);
    acks_enabled_ = enabled;
  }

  // The next `times` arrivals of segment `sequence_number` end their stream
  // with RESOURCE_EXHAUSTED (as a learner whose segment budget is spent
  // does), unrecorded.
  void Refuse(
      int64_t sequence_number, int times,
      grpc::Status refusal = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                          "learner segment budget spent")) {
    absl::MutexLock lock(&mu_);
    refuse_sequence_number_ = sequence_number;
    refusals_left_ = times;
    refusal_ = std::move(refusal);
  }

  int refusals() const {
    absl::MutexLock lock(&mu_);
    return refusals_;
  }

  // Lets the SubscribePolicy handlers return (a server shutting down waits
  // for them).
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  std::vector<RolloutSegment> segments() const {
    absl::MutexLock lock(&mu_);
    return received_;
  }

  std::vector<int64_t> sequence_numbers() const {
    absl::MutexLock lock(&mu_);
    std::vector<int64_t> numbers;
    for (const RolloutSegment& s : received_) {
      numbers.push_back(s.sequence_number());
    }
    return numbers;
  }

  // True once at least `n` segments arrived (false at the deadline).
  bool WaitForSegments(size_t n, absl::Duration timeout = kDeadline) const {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() {
      mu_.AssertReaderHeld();
      return received_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }

  grpc::Status StreamRollouts(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<RolloutAck, RolloutSegment>* stream) override {
    RolloutSegment segment;
    while (stream->Read(&segment)) {
      RolloutAck ack;
      bool send;
      {
        absl::MutexLock lock(&mu_);
        if (segment.sequence_number() == refuse_sequence_number_ &&
            refusals_left_ > 0) {
          --refusals_left_;
          ++refusals_;
          return refusal_;
        }
        if (segment.sequence_number() == acked_ + 1) {
          acked_ = segment.sequence_number();
        }
        received_.push_back(segment);
        send = acks_enabled_;
        ack.set_acked_sequence_number(acked_);
        ack.set_credits(4);
        ack.set_latest_policy_version(latest_.version());
      }
      if (send && !stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status SubscribePolicy(
      grpc::ServerContext* context, const SubscribePolicyRequest* request,
      grpc::ServerWriter<PolicyUpdate>* writer) override {
    int64_t sent = request->have_version();
    while (!context->IsCancelled()) {
      PolicyUpdate update;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [&]() {
          mu_.AssertReaderHeld();
          return closed_ || latest_.final() || latest_.version() > sent;
        };
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(50));
        if (closed_) return grpc::Status::OK;
        if (!ready()) continue;
        update = latest_;
      }
      if (!writer->Write(update)) break;
      sent = update.version();
      if (update.final()) break;
    }
    return grpc::Status::OK;
  }

 private:
  mutable absl::Mutex mu_;
  PolicyUpdate latest_ ABSL_GUARDED_BY(mu_);
  bool acks_enabled_ ABSL_GUARDED_BY(mu_) = true;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refuse_sequence_number_ ABSL_GUARDED_BY(mu_) = 0;
  int refusals_left_ ABSL_GUARDED_BY(mu_) = 0;
  int refusals_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::Status refusal_ ABSL_GUARDED_BY(mu_);
  std::vector<RolloutSegment> received_ ABSL_GUARDED_BY(mu_);
};

ServerOptions LearnerServerOptions(int port = 0) {
  ServerOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  options.max_receive_message_bytes = 256 << 20;
  options.max_send_message_bytes = 256 << 20;
  return options;
}

void StopServer(FakeLearner& learner, RunningServer& server) {
  learner.Close();
  server.server->Shutdown(
      absl::ToChronoTime(absl::Now() + absl::Milliseconds(100)));
  server.server->Wait();
  server.server.reset();
}

ActorOptions TestOptions(const RunSpec& spec, int port, int actor_id) {
  ActorOptions options;
  options.learner_address = absl::StrCat("127.0.0.1:", port);
  options.spec = spec;
  options.actor_id = actor_id;
  options.initial_backoff = absl::Milliseconds(20);
  options.max_backoff = absl::Milliseconds(500);
  options.max_disconnected = absl::Seconds(60);
  options.flush_timeout = absl::Seconds(5);
  return options;
}

// Runs ActorClient::Run() in a thread.
class BackgroundRun {
 public:
  explicit BackgroundRun(ActorClient* client)
      : thread_([this, client] {
          status_ = client->Run();
          done_.Notify();
        }) {}
  ~BackgroundRun() { thread_.join(); }

  // Run()'s status, or DEADLINE_EXCEEDED if it has not returned in time.
  absl::Status Wait(absl::Duration timeout = kDeadline) {
    if (!done_.WaitForNotificationWithTimeout(timeout)) {
      return absl::DeadlineExceededError("Run() did not return");
    }
    return status_;
  }

 private:
  absl::Status status_;
  absl::Notification done_;
  std::thread thread_;
};

// Waits until `predicate` holds on the actor's counters.
bool WaitUntil(ActorClient* client,
               const std::function<bool(const ActorCounters&)>& predicate) {
  return client->AwaitCounters(predicate, kDeadline);
}

TEST(ActorClientTest, SyncModeWaitsForEachNewVersionAndStopsOnFinal) {
  FakeLearner learner;
  learner.Publish(1);
  auto server = StartServer({&learner}, LearnerServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  ActorOptions options = TestOptions(CartPoleRun("SYNC"), server->port, 0);
  // --profile=1: the first segment's collection traced.
  options.profile_segments = 1;
  options.profile_path = MakeTestDir("profile") + "/actor.json";
  auto client = ActorClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  BackgroundRun run(client->get());

  ASSERT_TRUE(learner.WaitForSegments(1));
  // The step loop now waits for a version newer than 1 and sends nothing.
  ASSERT_TRUE(WaitUntil(client->get(), [](const ActorCounters& c) {
    return c.waiting_for_newer_than == 1;
  }));
  EXPECT_EQ((*client)->counters().segments_collected, 1);
  EXPECT_EQ(learner.segments().size(), 1u);

  learner.Publish(2);
  ASSERT_TRUE(learner.WaitForSegments(2));
  ASSERT_TRUE(WaitUntil(client->get(), [](const ActorCounters& c) {
    return c.waiting_for_newer_than == 2;
  }));
  EXPECT_EQ(learner.segments().size(), 2u);

  learner.Publish(3, /*final=*/true);
  ASSERT_TRUE(run.Wait().ok());
  const ActorCounters counters = (*client)->counters();
  EXPECT_TRUE(counters.final_received);
  EXPECT_EQ(counters.latest_version, 2);
  EXPECT_EQ(counters.segments_acked, 2);
  EXPECT_EQ(counters.segments_sent, 2);
  EXPECT_THAT(ReadTestFile(options.profile_path),
              ::testing::HasSubstr("aten::"));

  const std::vector<RolloutSegment> segments = learner.segments();
  ASSERT_EQ(segments.size(), 2u);
  for (size_t i = 0; i < segments.size(); ++i) {
    const RolloutSegment& segment = segments[i];
    EXPECT_EQ(segment.run_id(), "actor-test");
    EXPECT_EQ(segment.actor_id(), 0);
    EXPECT_EQ(segment.sequence_number(), static_cast<int64_t>(i + 1));
    // Strictly on-policy: segment k was collected with version k.
    EXPECT_EQ(segment.policy_version(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(segment.env().max_episode_steps(), 500);
    EXPECT_EQ(segment.episode_returns_size(), segment.episode_lengths_size());
    absl::StatusOr<Rollout> rollout = DecodeSegment(segment, CartPoleShape());
    ASSERT_TRUE(rollout.ok()) << rollout.status();
    EXPECT_EQ(rollout->num_steps(), 8);
    EXPECT_EQ(rollout->num_envs(), 4);
  }
  StopServer(learner, *server);
}

TEST(ActorClientTest, ReconnectsAndResendsUnackedSegmentsInOrder) {
  FakeLearner first;
  first.SetAcks(false);
  first.Publish(1);
  auto server = StartServer({&first}, LearnerServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = server->port;
  // A lag bound that lets the credits alone bound collection (the pacing by
  // freshness is SegmentWindowTest's).
  RunSpec spec = CartPoleRun("ASYNC");
  spec.set_max_policy_lag(8);
  auto client = ActorClient::Create(TestOptions(spec, port, 3));
  ASSERT_TRUE(client.ok()) << client.status();
  BackgroundRun run(client->get());

  // Without acks the actor has 2 segments in flight (the credits assumed
  // before the first ack) and one more collected, waiting.
  ASSERT_TRUE(first.WaitForSegments(2));
  ASSERT_TRUE(WaitUntil(client->get(), [](const ActorCounters& c) {
    return c.segments_collected >= 3;
  }));
  EXPECT_EQ(first.sequence_numbers(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ((*client)->counters().segments_acked, 0);

  // The learner goes away and comes back on the same port.
  StopServer(first, *server);
  FakeLearner second;
  second.Publish(1);
  auto restarted = StartServer({&second}, LearnerServerOptions(port));
  ASSERT_TRUE(restarted.ok()) << restarted.status();

  ASSERT_TRUE(second.WaitForSegments(6));
  const std::vector<int64_t> numbers = second.sequence_numbers();
  EXPECT_EQ(std::vector<int64_t>(numbers.begin(), numbers.begin() + 6),
            (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(WaitUntil(client->get(), [](const ActorCounters& c) {
    return c.segments_acked >= 6;
  }));
  ActorCounters counters = (*client)->counters();
  EXPECT_GE(counters.reconnects, 1);
  EXPECT_EQ(counters.segments_resent, 2);

  (*client)->Stop();
  ASSERT_TRUE(run.Wait().ok());
  counters = (*client)->counters();
  EXPECT_FALSE(counters.final_received);
  // Stop flushes: everything collected before the stop is acknowledged.
  EXPECT_EQ(counters.segments_acked, counters.segments_collected);
  for (const RolloutSegment& segment : second.segments()) {
    EXPECT_EQ(segment.actor_id(), 3);
    EXPECT_EQ(segment.policy_version(), 1);
    ASSERT_TRUE(DecodeSegment(segment, CartPoleShape()).ok());
  }
  StopServer(second, *restarted);
}

// A learner whose segment budget is spent refuses a segment with
// RESOURCE_EXHAUSTED (ending the stream): the actor reconnects after a
// backoff and resends it, again and again, and the run goes on.
TEST(ActorClientTest, ASegmentRefusedForResourcesIsResentAndTheRunGoesOn) {
  FakeLearner learner;
  learner.Publish(1);
  learner.Refuse(/*sequence_number=*/2, /*times=*/3);
  auto server = StartServer({&learner}, LearnerServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  auto client =
      ActorClient::Create(TestOptions(CartPoleRun("ASYNC"), server->port, 0));
  ASSERT_TRUE(client.ok()) << client.status();
  BackgroundRun run(client->get());

  ASSERT_TRUE(WaitUntil(client->get(), [](const ActorCounters& c) {
    return c.segments_acked >= 5;
  }));
  EXPECT_EQ(learner.refusals(), 3);
  EXPECT_GE((*client)->counters().reconnects, 3);
  // Every segment up to the 5th reached the learner, in order (earlier
  // ones perhaps twice: resent before their ack came).
  std::vector<int64_t> first;
  for (int64_t n : learner.sequence_numbers()) {
    if (first.empty() || n > first.back()) first.push_back(n);
  }
  ASSERT_GE(first.size(), 5u);
  EXPECT_EQ(std::vector<int64_t>(first.begin(), first.begin() + 5),
            (std::vector<int64_t>{1, 2, 3, 4, 5}));

  (*client)->Stop();
  EXPECT_TRUE(run.Wait().ok());
  StopServer(learner, *server);
}

// A segment refused for what it is (its shape or values, its size) would be
// refused again for ever: the actor ends with the reason (a worker failure
// the coordinator counts against the run) instead of resending it.
TEST(ActorClientTest, ASegmentRefusedForGoodEndsTheActorWithTheReason) {
  for (const grpc::Status& refusal :
       {grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     "segment.observations: shape [4, 2, 4], want [4, 2, 5]"),
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "Received message larger than max (9000000 vs. 4194304)"),
        // The learner's own limit (learner/learner_service.cc).
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "segment: 9000000 bytes, more than a segment of this run "
                     "can be (4194304 bytes: envs_per_actor x segment_length "
                     "x the env's sizes, twice over)")}) {
    FakeLearner learner;
    learner.Publish(1);
    learner.Refuse(/*sequence_number=*/2, /*times=*/1000, refusal);
    auto server = StartServer({&learner}, LearnerServerOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    auto client =
        ActorClient::Create(TestOptions(CartPoleRun("ASYNC"), server->port, 0));
    ASSERT_TRUE(client.ok()) << client.status();
    BackgroundRun run(client->get());
    const absl::Status ended = run.Wait();
    EXPECT_EQ(ended.code(), absl::StatusCode::kFailedPrecondition) << ended;
    EXPECT_TRUE(absl::StrContains(
        ended.message(), "refused a segment for a reason that cannot change"))
        << ended;
    EXPECT_TRUE(absl::StrContains(ended.message(), refusal.error_message()))
        << ended;
    EXPECT_EQ(learner.refusals(), 1);
    StopServer(learner, *server);
  }
}

TEST(ActorClientTest, GivesUpWithoutLearner) {
  // A port that was free a moment ago and has no server now.
  FakeLearner learner;
  auto server = StartServer({&learner}, LearnerServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = server->port;
  StopServer(learner, *server);

  ActorOptions options = TestOptions(CartPoleRun("ASYNC"), port, 0);
  options.max_disconnected = absl::Seconds(1);
  auto client = ActorClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Status status = (*client)->Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ((*client)->counters().segments_collected, 0);
}

TEST(ActorClientTest, StopBeforeAnyPolicyReturnsOk) {
  FakeLearner learner;  // publishes nothing
  auto server = StartServer({&learner}, LearnerServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  auto client =
      ActorClient::Create(TestOptions(CartPoleRun("SYNC"), server->port, 0));
  ASSERT_TRUE(client.ok()) << client.status();
  BackgroundRun run(client->get());
  (*client)->Stop();
  EXPECT_TRUE(run.Wait().ok());
  EXPECT_EQ((*client)->counters().segments_collected, 0);
  StopServer(learner, *server);
}

TEST(ActorClientTest, RejectsBadOptions) {
  ActorOptions options = TestOptions(CartPoleRun("SYNC"), 1, 0);
  options.learner_address = "";
  EXPECT_EQ(ActorClient::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = TestOptions(CartPoleRun("SYNC"), 1, -1);
  EXPECT_EQ(ActorClient::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rl
