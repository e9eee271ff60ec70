#include "learner/learner_core.h"

#include <torch/torch.h>

#include "common/run_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

RunSpec Spec(const std::string& extra) {
  auto spec = LoadRunSpec(
      "name: t\nenv: {id: CartPole-v1}\nenvs_per_actor: 2\nsegment_length: 4\n"
      "total_env_steps: 1000000\nppo: {num_minibatches: 1, num_epochs: 1}\n"
      "resources: {num_actors: 2}\n" +
          extra,
      RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::unique_ptr<RolloutSegment> Segment(int actor, int64_t seq,
                                        int64_t version) {
  Rollout r = Rollout::Allocate(4, 2, 4, 0);
  r.observations.uniform_(-0.05, 0.05);
  r.rewards.fill_(1);
  auto s = std::make_unique<RolloutSegment>();
  EXPECT_TRUE(EncodeSegment(r, s.get()).ok());
  s->set_run_id("t");
  s->set_actor_id(actor);
  s->set_sequence_number(seq);
  s->set_policy_version(version);
  EnvSpec* env = s->mutable_env();
  env->set_id("CartPole-v1");
  env->set_observation_size(4);
  env->set_num_discrete_actions(2);
  return s;
}

// Records the acks of one stream.
struct AckLog {
  absl::Mutex mu;
  std::vector<RolloutAck> acks;
  AckCallback Callback() {
    return [this](const RolloutAck& ack) {
      absl::MutexLock lock(&mu);
      acks.push_back(ack);
    };
  }
  bool WaitForAck(int64_t seq) {
    absl::MutexLock lock(&mu);
    auto has = [&]() {
      return !acks.empty() && acks.back().acked_sequence_number() >= seq;
    };
    return mu.AwaitWithTimeout(absl::Condition(&has), absl::Seconds(20));
  }
};

bool WaitForVersion(LearnerCore& core, int64_t version) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    if (core.GetStatus().policy_version() >= version) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

TEST(LearnerCoreTest, SyncUpdatesOnceEveryConnectedActorContributed) {
  LearnerOptions options;
  options.spec = Spec("");
  options.run_id = "t";
  auto core = LearnerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();
  ASSERT_NE((*core)->LatestPolicy(), nullptr);
  EXPECT_EQ((*core)->LatestPolicy()->version(), 1);
  AckLog a0, a1;
  const int64_t s0 = (*core)->OpenStream(0, a0.Callback());
  const int64_t s1 = (*core)->OpenStream(1, a1.Callback());
  ASSERT_TRUE((*core)->SubmitSegment(s0, Segment(0, 1, 1)).ok());
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ((*core)->GetStatus().policy_version(), 1);  // waits for actor 1
  ASSERT_TRUE((*core)->SubmitSegment(s1, Segment(1, 1, 1)).ok());
  ASSERT_TRUE(WaitForVersion(**core, 2));
  EXPECT_TRUE(a0.WaitForAck(1));
  EXPECT_TRUE(a1.WaitForAck(1));
  EXPECT_EQ((*core)->GetStatus().env_steps(), 16);
  EXPECT_EQ((*core)->LatestPolicy()->version(), 2);

  // Actor 1 goes away: actor 0 alone completes the next batch.
  (*core)->CloseStream(s1);
  ASSERT_TRUE((*core)->SubmitSegment(s0, Segment(0, 2, 2)).ok());
  ASSERT_TRUE(WaitForVersion(**core, 3));
}

TEST(LearnerCoreTest, StaleAndDuplicateSegmentsAreDroppedAndCounted) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  auto core = LearnerCore::Create(options);
  ASSERT_TRUE(core.ok());
  AckLog log;
  const int64_t s = (*core)->OpenStream(0, log.Callback());
  ASSERT_TRUE((*core)->SubmitSegment(s, Segment(0, 1, 1)).ok());
  ASSERT_TRUE(WaitForVersion(**core, 2));
  // Resent after a reconnect: dropped, acked again.
  ASSERT_TRUE((*core)->SubmitSegment(s, Segment(0, 1, 1)).ok());
  // Collected by version 1 while the learner is at 2: stale in SYNC mode.
  ASSERT_TRUE((*core)->SubmitSegment(s, Segment(0, 2, 1)).ok());
  ASSERT_TRUE(log.WaitForAck(2));
  const LearnerStatus status = (*core)->GetStatus();
  EXPECT_EQ(status.segments_duplicate(), 1);
  EXPECT_EQ(status.segments_dropped_stale(), 1);
  EXPECT_EQ(status.policy_version(), 2);
  EXPECT_EQ(log.acks.back().dropped_stale(), 1);
}

TEST(LearnerCoreTest, ARestartedActorProcessNumbersAfresh) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  auto core = LearnerCore::Create(options);
  ASSERT_TRUE(core.ok());
  AckLog log;
  const int64_t s = (*core)->OpenStream(0, log.Callback());
  auto first = Segment(0, 1, 1);
  first->set_actor_incarnation(111);
  ASSERT_TRUE((*core)->SubmitSegment(s, std::move(first)).ok());
  ASSERT_TRUE(WaitForVersion(**core, 2));
  // Same actor id, new process: sequence number 1 again is not a duplicate.
  (*core)->CloseStream(s);
  const int64_t s2 = (*core)->OpenStream(0, log.Callback());
  auto second = Segment(0, 1, 2);
  second->set_actor_incarnation(222);
  ASSERT_TRUE((*core)->SubmitSegment(s2, std::move(second)).ok());
  ASSERT_TRUE(WaitForVersion(**core, 3));
  EXPECT_EQ((*core)->GetStatus().segments_duplicate(), 0);
}

TEST(LearnerCoreTest, MalformedSegmentsAreRejectedAndHarmNothing) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  options.run_id = "t";
  auto core = LearnerCore::Create(options);
  ASSERT_TRUE(core.ok());
  AckLog log;
  const int64_t s = (*core)->OpenStream(0, log.Callback());

  auto bad_shape = Segment(0, 1, 1);
  bad_shape->mutable_rewards()->set_shape(0, 5);
  absl::Status status = (*core)->SubmitSegment(s, std::move(bad_shape));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("segment.rewards"));

  auto wrong_run = Segment(0, 1, 1);
  wrong_run->set_run_id("other");
  EXPECT_THAT(
      std::string((*core)->SubmitSegment(s, std::move(wrong_run)).message()),
      HasSubstr("segment.run_id"));
  EXPECT_THAT(
      std::string((*core)->SubmitSegment(s, Segment(0, 0, 1)).message()),
      HasSubstr("segment.sequence_number"));
  EXPECT_THAT(
      std::string((*core)->SubmitSegment(s, Segment(3, 1, 1)).message()),
      HasSubstr("segment.actor_id"));
  EXPECT_EQ((*core)->GetStatus().segments_rejected(), 4);

  // The good segment after them is used normally.
  ASSERT_TRUE((*core)->SubmitSegment(s, Segment(0, 1, 1)).ok());
  ASSERT_TRUE(WaitForVersion(**core, 2));
}

TEST(LearnerCoreTest, AsyncToleratesLagUpToTheLimit) {
  LearnerOptions options;
  options.spec = Spec(
      "sync_mode: ASYNC\nmax_policy_lag: 1\n"
      "resources: {num_actors: 1}");
  auto core = LearnerCore::Create(options);
  ASSERT_TRUE(core.ok());
  AckLog log;
  const int64_t s = (*core)->OpenStream(0, log.Callback());
  ASSERT_TRUE((*core)->SubmitSegment(s, Segment(0, 1, 1)).ok());
  ASSERT_TRUE(WaitForVersion(**core, 2));
  ASSERT_TRUE((*core)->SubmitSegment(s, Segment(0, 2, 1)).ok());  // lag 1: used
  ASSERT_TRUE(WaitForVersion(**core, 3));
  ASSERT_TRUE(
      (*core)->SubmitSegment(s, Segment(0, 3, 1)).ok());  // lag 2: dropped
  ASSERT_TRUE(log.WaitForAck(3));
  EXPECT_EQ((*core)->GetStatus().segments_dropped_stale(), 1);
  EXPECT_EQ((*core)->GetStatus().policy_version(), 3);
}

TEST(LearnerCoreTest, SubscribersGetEveryNewVersionAndTheFinalOne) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}\ntotal_env_steps: 16");
  auto core = LearnerCore::Create(options);
  ASSERT_TRUE(core.ok());
  absl::Mutex mu;
  std::vector<int64_t> versions;
  bool final = false;
  std::shared_ptr<const PolicyUpdate> latest;
  (*core)->Subscribe(
      [&](std::shared_ptr<const PolicyUpdate> u) {
        absl::MutexLock lock(&mu);
        versions.push_back(u->version());
        final |= u->final();
      },
      &latest);
  EXPECT_EQ(latest->version(), 1);
  AckLog log;
  const int64_t s = (*core)->OpenStream(0, log.Callback());
  ASSERT_TRUE((*core)->SubmitSegment(s, Segment(0, 1, 1)).ok());
  ASSERT_TRUE((*core)->SubmitSegment(s, Segment(0, 2, 2)).ok());
  ASSERT_TRUE((*core)->WaitUntilDone(absl::Seconds(20)));
  EXPECT_TRUE((*core)->final_status().ok());
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(final);
  EXPECT_EQ(versions.front(), 2);
  EXPECT_EQ((*core)->GetStatus().env_steps(), 16);
}

}  // namespace
}  // namespace rl
