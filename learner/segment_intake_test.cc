#include "learner/segment_intake.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSteps = 16;  // T x E of every test segment

SegmentIntakeOptions Options() {
  SegmentIntakeOptions o;
  o.run_id = "run-1";
  o.credits = 3;
  o.queue_capacity = 4;
  o.actors_here = 2;
  o.num_actors = 2;
  o.batch_steps = 2 * kSteps;
  o.decode = [](const RolloutSegment& s) -> absl::StatusOr<DecodedSegment> {
    if (s.episode_returns_size() > 0 && s.episode_returns(0) < 0) {
      return absl::InvalidArgumentError("segment.episode_returns: negative");
    }
    DecodedSegment d;
    d.payload = std::make_unique<SegmentPayload>();
    d.env_steps = kSteps;
    return d;
  };
  return o;
}

std::unique_ptr<RolloutSegment> Segment(int actor, int64_t sequence,
                                        int64_t version = 1,
                                        uint64_t incarnation = 7) {
  auto s = std::make_unique<RolloutSegment>();
  s->set_run_id("run-1");
  s->set_actor_id(actor);
  s->set_actor_incarnation(incarnation);
  s->set_sequence_number(sequence);
  s->set_policy_version(version);
  return s;
}

// An actor's stream: the acks it received.
struct Actor {
  Actor(SegmentIntake& intake, int id) {
    stream = intake.OpenStream(
        id, [this](const RolloutAck& a) { acks.push_back(a); });
  }
  int64_t stream;
  std::vector<RolloutAck> acks;
};

TEST(SegmentIntakeTest, SyncBatchCompletesWhenEveryConnectedActorStaged) {
  SegmentIntake intake(Options());
  Actor a(intake, 0), b(intake, 1);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 1)));
  EXPECT_FALSE(intake.StageNext(absl::ZeroDuration()));  // b has not sent
  ASSERT_OK(intake.Submit(b.stream, Segment(1, 1)));
  EXPECT_TRUE(intake.StageNext(absl::ZeroDuration()));
  const SegmentBatch batch = intake.TakeBatch();
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_TRUE(a.acks.empty());
  intake.SetPolicyVersion(2);
  intake.AcknowledgeUsed(batch);
  ASSERT_EQ(a.acks.size(), 1u);
  EXPECT_EQ(a.acks[0].acked_sequence_number(), 1);
  EXPECT_EQ(a.acks[0].latest_policy_version(), 2);
  EXPECT_EQ(a.acks[0].credits(), 3);
  EXPECT_EQ(intake.counts().received, 2);
  EXPECT_EQ(intake.counts().connected_actors, 2);
}

TEST(SegmentIntakeTest, AsyncBatchCompletesOnStepsAndKeepsLagWithinTheLimit) {
  SegmentIntakeOptions o = Options();
  o.async = true;
  o.max_policy_lag = 1;
  SegmentIntake intake(o);
  Actor a(intake, 0), b(intake, 1);
  intake.SetPolicyVersion(3);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 1, /*version=*/2)));  // lag 1
  EXPECT_FALSE(intake.StageNext(absl::ZeroDuration()));
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 2, /*version=*/1)));  // lag 2
  EXPECT_FALSE(intake.StageNext(absl::ZeroDuration()));
  EXPECT_EQ(intake.counts().dropped_stale, 1);
  ASSERT_EQ(a.acks.size(), 1u);  // a dropped segment is acknowledged at once
  EXPECT_EQ(a.acks[0].dropped_stale(), 1);
  EXPECT_EQ(a.acks[0].acked_sequence_number(), 2);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 3, /*version=*/3)));
  EXPECT_TRUE(intake.StageNext(absl::ZeroDuration()));  // 2 x kSteps staged
  EXPECT_EQ(intake.TakeBatch().size(), 2u);
}

TEST(SegmentIntakeTest, AVersionFromTheFutureIsStale) {
  std::vector<SegmentKey> stale;
  SegmentIntakeOptions o = Options();
  o.on_stale = [&](const SegmentKey& k) { stale.push_back(k); };
  SegmentIntake logged(o);
  Actor b(logged, 0);
  ASSERT_OK(logged.Submit(b.stream, Segment(0, 1, /*version=*/5)));
  EXPECT_FALSE(logged.StageNext(absl::ZeroDuration()));
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].sequence_number, 1);
  EXPECT_EQ(stale[0].incarnation, 7u);
}

TEST(SegmentIntakeTest, ResendsAreDuplicatesAndAckedOnesAreAckedAgain) {
  SegmentIntake intake(Options());
  Actor a(intake, 0), b(intake, 1);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 1)));
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 1)));  // queued: no ack
  EXPECT_EQ(intake.counts().duplicate, 1);
  EXPECT_TRUE(a.acks.empty());
  ASSERT_OK(intake.Submit(b.stream, Segment(1, 1)));
  intake.StageNext(absl::ZeroDuration());
  intake.StageNext(absl::ZeroDuration());
  intake.AcknowledgeUsed(intake.TakeBatch());
  ASSERT_EQ(a.acks.size(), 1u);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 1)));  // used: ack again
  EXPECT_EQ(intake.counts().duplicate, 2);
  ASSERT_EQ(a.acks.size(), 2u);
  EXPECT_EQ(a.acks[1].acked_sequence_number(), 1);
}

TEST(SegmentIntakeTest, BadHeadersAreInvalidArgumentNamingTheField) {
  SegmentIntake intake(Options());
  Actor a(intake, 0);
  auto other_run = Segment(0, 1);
  other_run->set_run_id("run-2");
  EXPECT_THAT(intake.Submit(a.stream, std::move(other_run)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.run_id")));
  EXPECT_THAT(intake.Submit(a.stream, Segment(0, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.sequence_number")));
  EXPECT_THAT(intake.Submit(a.stream, Segment(0, 1, /*version=*/0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.policy_version")));
  EXPECT_THAT(intake.Submit(a.stream, Segment(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.actor_id")));
  auto undecodable = Segment(0, 1);
  undecodable->add_episode_returns(-1);
  EXPECT_THAT(intake.Submit(a.stream, std::move(undecodable)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.episode_returns")));
  EXPECT_EQ(intake.counts().rejected, 5);
  EXPECT_EQ(intake.counts().received, 0);
  intake.CloseStream(a.stream);
  EXPECT_THAT(intake.Submit(a.stream, Segment(0, 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(intake.counts().connected_actors, 0);
}

TEST(SegmentIntakeTest, AReplacedProcessIsRefusedAndTheNewOneStartsAfresh) {
  SegmentIntake intake(Options());
  Actor a(intake, 0);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 5, 1, /*incarnation=*/7)));
  // A new process under actor id 0 numbers from 1 again.
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 1, 1, /*incarnation=*/8)));
  EXPECT_EQ(intake.counts().duplicate, 0);
  EXPECT_THAT(intake.Submit(a.stream, Segment(0, 6, 1, /*incarnation=*/7)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("was replaced by process 8")));
  // Process 7's queued segment, once staged and used, does not move
  // process 8's watermark.
  intake.StageNext(absl::ZeroDuration());
  intake.StageNext(absl::ZeroDuration());
  intake.AcknowledgeUsed(intake.TakeBatch());
  const std::vector<AckWatermark> marks = intake.Watermarks(true);
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].incarnation(), 8u);
  EXPECT_EQ(marks[0].sequence_number(), 1);
}

// A replaced process that keeps reconnecting under the same actor id opens
// streams that are refused at their first segment. Each took the actor's
// ack route on opening; when it ends, the route goes back to the live
// process's stream, which gets its acks again.
TEST(SegmentIntakeTest, ARefusedStreamGivesTheAckRouteBack) {
  SegmentIntake intake(Options());
  {
    Actor replaced(intake, 0);  // process 7
    ASSERT_OK(
        intake.Submit(replaced.stream, Segment(0, 1, 1, /*incarnation=*/7)));
    intake.CloseStream(replaced.stream);
  }
  Actor live(intake, 0);  // process 8 takes actor 0 over
  ASSERT_OK(intake.Submit(live.stream, Segment(0, 1, 1, /*incarnation=*/8)));
  Actor old(intake, 0);  // process 7 reconnects
  EXPECT_THAT(intake.Submit(old.stream, Segment(0, 2, 1, /*incarnation=*/7)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("was replaced by process 8")));
  intake.CloseStream(old.stream);  // the refused stream ends
  EXPECT_EQ(intake.counts().connected_actors, 1);
  Actor other(intake, 1);
  ASSERT_OK(intake.Submit(other.stream, Segment(1, 1)));
  intake.StageNext(absl::ZeroDuration());
  intake.StageNext(absl::ZeroDuration());
  intake.AcknowledgeUsed(intake.TakeBatch());
  ASSERT_EQ(live.acks.size(), 1u);
  EXPECT_EQ(live.acks[0].acked_sequence_number(), 1);
  EXPECT_TRUE(old.acks.empty());
  // The live stream's own end leaves the actor with no route.
  intake.CloseStream(live.stream);
  EXPECT_EQ(intake.counts().connected_actors, 1);  // actor 1 only
}

TEST(SegmentIntakeTest, AFullQueueOrBudgetRefusesWithResourceExhausted) {
  SegmentIntakeOptions o = Options();
  o.queue_capacity = 2;
  auto budget = std::make_shared<SegmentBudget>(1 << 20);
  o.budget = budget;
  SegmentIntake intake(o);
  Actor a(intake, 0);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 1)));
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 2)));
  EXPECT_GT(budget->held_bytes(), 0);
  EXPECT_THAT(intake.Submit(a.stream, Segment(0, 3)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("exceeded its 3 credits")));
  // Staging gives a segment's budget back.
  intake.StageNext(absl::ZeroDuration());
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 3)));
  // Closing drops what waits and gives its budget back; later segments are
  // accepted and dropped.
  intake.Close();
  EXPECT_EQ(budget->held_bytes(), 0);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 4)));
  EXPECT_EQ(budget->held_bytes(), 0);
  EXPECT_EQ(intake.counts().queued, 0);

  // The budget admits one segment when none waits, whatever its size; a
  // second waits for the first to be staged.
  SegmentIntakeOptions tiny = Options();
  tiny.budget = std::make_shared<SegmentBudget>(4);
  SegmentIntake small(tiny);
  Actor b(small, 0);
  ASSERT_OK(small.Submit(b.stream, Segment(0, 1)));
  EXPECT_THAT(small.Submit(b.stream, Segment(0, 2)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  small.StageNext(absl::ZeroDuration());
  EXPECT_OK(small.Submit(b.stream, Segment(0, 2)));
}

TEST(SegmentIntakeTest, RestoredWatermarksMakeResendsDuplicates) {
  SegmentIntake intake(Options());
  AckWatermark w;
  w.set_actor_id(0);
  w.set_incarnation(7);
  w.set_sequence_number(4);
  intake.RestoreWatermarks({w});
  EXPECT_EQ(intake.Watermarks(false).size(), 1u);
  EXPECT_TRUE(intake.Watermarks(true).empty());  // it has not streamed here
  Actor a(intake, 0);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 4)));
  EXPECT_EQ(intake.counts().duplicate, 1);
  ASSERT_EQ(a.acks.size(), 1u);
  EXPECT_EQ(a.acks[0].acked_sequence_number(), 4);
  ASSERT_OK(intake.Submit(a.stream, Segment(0, 5)));
  EXPECT_EQ(intake.counts().queued, 1);
  EXPECT_EQ(intake.Watermarks(true).size(), 1u);
}

}  // namespace
}  // namespace rl
