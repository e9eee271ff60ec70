// LearnerCore's intake of segments and its acks (learner_core.cc over
// segment_intake.cc): stale and duplicate segments dropped and counted,
// actor processes restarted or replaced, malformed segments and
// out-of-range rewards refused, ASYNC's lag limit, and the byte budget
// over all streams. Helpers: learner_core_test_util.h.
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/learner_core.h"
#include "learner/learner_core_test_util.h"
#include "learner/segment_budget.h"
#include "policy/actor_critic.h"
#include "proto/learner.pb.h"
#include "testing/status_matchers.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// CudaRuntimeFirst (learner_core_test_util.h) before any test.
const auto* const kCudaRuntimeFirst =
    ::testing::AddGlobalTestEnvironment(new CudaRuntimeFirst);

TEST(LearnerCoreTest, StaleAndDuplicateSegmentsAreDroppedAndCounted) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  // Resent after a reconnect: dropped, acked again.
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  // Collected by version 1 while the learner is at 2: stale in SYNC mode.
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 2, 1)));
  ASSERT_TRUE(log.WaitForAck(2));
  const LearnerStatus status = core->GetStatus();
  EXPECT_EQ(status.segments_duplicate(), 1);
  EXPECT_EQ(status.segments_dropped_stale(), 1);
  EXPECT_EQ(status.policy_version(), 2);
  EXPECT_EQ(log.Last().dropped_stale(), 1);
}

TEST(LearnerCoreTest, ARestartedActorProcessNumbersAfresh) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  auto first = Segment(0, 1, 1);
  first->set_actor_incarnation(111);
  ASSERT_OK(core->SubmitSegment(s, std::move(first)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  // Same actor id, new process: sequence number 1 again is not a duplicate.
  core->CloseStream(s);
  const int64_t s2 = core->OpenStream(0, log.Callback());
  auto second = Segment(0, 1, 2);
  second->set_actor_incarnation(222);
  ASSERT_OK(core->SubmitSegment(s2, std::move(second)));
  ASSERT_TRUE(WaitForVersion(*core, 3));
  EXPECT_EQ(core->GetStatus().segments_duplicate(), 0);
}

// Two processes streaming as one actor (one replaced, or an impostor) do
// not take the id from each other in turn (each flip restarted the
// numbering and froze the run with no error): the newest keeps it, the
// replaced one is refused with the reason.
TEST(LearnerCoreTest, AReplacedActorProcessCannotTakeItsIdBack) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  auto first = Segment(0, 1, 1);
  first->set_actor_incarnation(111);
  ASSERT_OK(core->SubmitSegment(s, std::move(first)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  const int64_t s2 = core->OpenStream(0, log.Callback());
  auto newer = Segment(0, 1, 2);
  newer->set_actor_incarnation(222);
  ASSERT_OK(core->SubmitSegment(s2, std::move(newer)));
  ASSERT_TRUE(WaitForVersion(*core, 3));
  const int64_t rejected = core->GetStatus().segments_rejected();
  auto stale = Segment(0, 2, 2);
  stale->set_actor_incarnation(111);
  EXPECT_THAT(core->SubmitSegment(s, std::move(stale)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("actor 0: process 111 was replaced by "
                                 "process 222")));
  EXPECT_EQ(core->GetStatus().segments_rejected(), rejected + 1);
  // The newer one goes on, its numbering intact.
  auto next = Segment(0, 2, 3);
  next->set_actor_incarnation(222);
  ASSERT_OK(core->SubmitSegment(s2, std::move(next)));
  ASSERT_TRUE(WaitForVersion(*core, 4));
  EXPECT_EQ(core->GetStatus().segments_duplicate(), 0);
}

TEST(LearnerCoreTest, MalformedSegmentsAreRejectedAndHarmNothing) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  options.run_id = "t";
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());

  auto bad_shape = Segment(0, 1, 1);
  bad_shape->mutable_rewards()->set_shape(0, 5);
  EXPECT_THAT(core->SubmitSegment(s, std::move(bad_shape)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.rewards")));

  auto wrong_run = Segment(0, 1, 1);
  wrong_run->set_run_id("other");
  EXPECT_THAT(core->SubmitSegment(s, std::move(wrong_run)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.run_id")));
  EXPECT_THAT(core->SubmitSegment(s, Segment(0, 0, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.sequence_number")));
  EXPECT_THAT(core->SubmitSegment(s, Segment(3, 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.actor_id")));
  EXPECT_EQ(core->GetStatus().segments_rejected(), 4);

  // The good segment after them is used normally.
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
}

TEST(LearnerCoreTest, AsyncToleratesLagUpToTheLimit) {
  LearnerOptions options;
  options.spec = Spec(
      "sync_mode: ASYNC\nmax_policy_lag: 1\n"
      "resources: {num_actors: 1}");
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 2, 1)));  // lag 1: used
  ASSERT_TRUE(WaitForVersion(*core, 3));
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 3, 1)));  // lag 2: dropped
  ASSERT_TRUE(log.WaitForAck(3));
  EXPECT_EQ(core->GetStatus().segments_dropped_stale(), 1);
  EXPECT_EQ(core->GetStatus().policy_version(), 3);
}

// While an update runs, segments pile up for the PPO thread; the learner's
// byte budget bounds them over all streams. A segment beyond it is refused
// (counted, not recorded, so the actor's resend is taken, not called a
// duplicate), and the budget frees up as the PPO thread takes segments.
TEST(LearnerCoreTest, SegmentsBeyondTheByteBudgetAreRefusedUntilItFreesUp) {
  // One segment of each actor fits (their ids make their sizes differ).
  const int64_t both_bytes = static_cast<int64_t>(
      Segment(0, 1, 1)->ByteSizeLong() + Segment(1, 1, 1)->ByteSizeLong());
  auto budget = std::make_shared<SegmentBudget>(both_bytes);
  absl::Notification in_update, release;
  LearnerOptions options;
  options.spec = Spec(
      "sync_mode: ASYNC\nmax_policy_lag: 100\n"
      "resources: {num_actors: 2}");
  options.segment_budget = budget;
  options.after_update_for_testing = [&](int64_t update, ActorCritic&) {
    if (update != 1) return;
    in_update.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(60));
  };
  AckLog a0, a1;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  struct ReleaseOnExit {
    absl::Notification* release;
    ~ReleaseOnExit() {
      if (!release->HasBeenNotified()) release->Notify();
    }
  } release_on_exit{&release};
  const int64_t s0 = core->OpenStream(0, a0.Callback());
  const int64_t s1 = core->OpenStream(1, a1.Callback());
  ASSERT_OK(core->SubmitSegment(s0, Segment(0, 1, 1)));
  ASSERT_OK(core->SubmitSegment(s1, Segment(1, 1, 1)));
  ASSERT_TRUE(in_update.WaitForNotificationWithTimeout(absl::Seconds(60)));

  // The PPO thread is in update 1: two segments fit, the third does not.
  ASSERT_OK(core->SubmitSegment(s0, Segment(0, 2, 1)));
  ASSERT_OK(core->SubmitSegment(s1, Segment(1, 2, 1)));
  EXPECT_EQ(budget->held_bytes(), both_bytes);
  EXPECT_THAT(core->SubmitSegment(s0, Segment(0, 3, 1)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("segment budget spent"),
                             HasSubstr("(--max_inflight_segment_mb)"))));
  EXPECT_EQ(budget->refused(), 1);
  EXPECT_EQ(budget->held_bytes(), both_bytes);

  release.Notify();
  ASSERT_TRUE(WaitFor([&] { return budget->held_bytes() == 0; },
                      absl::Seconds(60), absl::Milliseconds(5)));
  // The resend is taken; nothing accepted was lost.
  ASSERT_OK(core->SubmitSegment(s0, Segment(0, 3, 1)));
  ASSERT_OK(core->SubmitSegment(s1, Segment(1, 3, 1)));
  EXPECT_TRUE(a0.WaitForAck(3));
  EXPECT_TRUE(a1.WaitForAck(3));
  const LearnerStatus status = core->GetStatus();
  EXPECT_EQ(status.updates(), 3);
  EXPECT_EQ(status.env_steps(), 3 * 2 * 8);
  EXPECT_EQ(status.segments_duplicate(), 0);
  EXPECT_EQ(budget->refused(), 1);
  EXPECT_TRUE(WaitFor([&] { return budget->held_bytes() == 0; },
                      absl::Seconds(60), absl::Milliseconds(5)));
}

// A reward outside the env's declared range (CartPole: [0, 1]) is refused
// at ingest, naming the field; it never reaches an update.
TEST(LearnerCoreTest, AnOutOfRangeRewardIsRefusedAtIngest) {
  LearnerOptions options;
  options.spec = Spec("");
  options.run_id = "t";
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  auto segment = Segment(0, 1, 1);
  float* rewards = reinterpret_cast<float*>(
      segment->mutable_rewards()->mutable_data()->data());
  rewards[3] = 3e38f;
  EXPECT_THAT(core->SubmitSegment(stream, std::move(segment)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.rewards: element 3 is 3e+38, "
                                 "outside the environment's range")));
  // The run goes on with good segments.
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 1, 1)));
  EXPECT_TRUE(WaitForVersion(*core, 2));
}

}  // namespace
}  // namespace rl
