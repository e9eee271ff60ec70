// SegmentWindow without a stream: numbering, the credit bound, cumulative
// acks, resends after a reconnect, and acks that are old, repeated or ahead.
#include "actor/segment_window.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "proto/learner.pb.h"

namespace rl {
namespace {

constexpr uint64_t kIncarnation = 0xfeedbeefcafe;

std::unique_ptr<SegmentWindow> MakeWindow(int initial_credits = 2,
                                          uint64_t incarnation = kIncarnation) {
  absl::StatusOr<std::unique_ptr<SegmentWindow>> window =
      SegmentWindow::Create({incarnation, initial_credits});
  EXPECT_TRUE(window.ok()) << window.status();
  return window.ok() ? std::move(*window) : nullptr;
}

std::shared_ptr<const RolloutSegment> Segment(
    int64_t sequence_number, uint64_t incarnation = kIncarnation) {
  auto segment = std::make_shared<RolloutSegment>();
  segment->set_sequence_number(sequence_number);
  segment->set_actor_incarnation(incarnation);
  return segment;
}

RolloutAck Ack(int64_t acked_sequence_number, int credits) {
  RolloutAck ack;
  ack.set_acked_sequence_number(acked_sequence_number);
  ack.set_credits(credits);
  return ack;
}

// Assigns the next number and adds its segment, as the step loop and the
// sender do for one collected segment.
int64_t Collect(SegmentWindow& window) {
  const int64_t sequence_number = window.AssignNext();
  const absl::Status added = window.Add(Segment(sequence_number));
  EXPECT_TRUE(added.ok()) << added;
  return sequence_number;
}

// (sequence number, resend) of each write.
using Writes = std::vector<std::pair<int64_t, bool>>;

// Writes everything the window lets through, as the sender does.
Writes WriteAll(SegmentWindow& window) {
  Writes written;
  while (std::optional<SegmentWindow::Write> write = window.NextToWrite()) {
    EXPECT_EQ(write->segment->sequence_number(), write->sequence_number);
    written.emplace_back(write->sequence_number, write->resend);
    window.OnWritten(write->sequence_number);
  }
  return written;
}

TEST(SegmentWindowTest, NumbersFromOneInOrderPerIncarnation) {
  auto window = MakeWindow(/*initial_credits=*/8);
  ASSERT_NE(window, nullptr);
  EXPECT_EQ(window->next_sequence_number(), 1);
  EXPECT_EQ(window->AssignNext(), 1);
  EXPECT_EQ(window->next_sequence_number(), 2);
  EXPECT_EQ(window->AssignNext(), 2);
  EXPECT_EQ(window->AssignNext(), 3);
  EXPECT_EQ(window->last_assigned(), 3);
  EXPECT_EQ(window->unacked(), 3);
  EXPECT_EQ(window->incarnation(), kIncarnation);

  // Another process (incarnation) for the same actor starts again at 1.
  auto next_process = MakeWindow(/*initial_credits=*/8, kIncarnation + 1);
  ASSERT_NE(next_process, nullptr);
  EXPECT_EQ(next_process->AssignNext(), 1);
  EXPECT_EQ(next_process->incarnation(), kIncarnation + 1);
}

TEST(SegmentWindowTest, AddRefusesGapsRepeatsUnassignedAndOtherIncarnations) {
  auto window = MakeWindow();
  ASSERT_NE(window, nullptr);
  // Nothing assigned yet.
  EXPECT_EQ(window->Add(Segment(1)).code(),
            absl::StatusCode::kFailedPrecondition);
  window->AssignNext();
  window->AssignNext();
  EXPECT_EQ(window->Add(Segment(2)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(window->Add(Segment(1, kIncarnation + 1)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(window->Add(Segment(1)).ok());
  EXPECT_EQ(window->Add(Segment(1)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(window->Add(Segment(2)).ok());
  EXPECT_EQ(window->Add(Segment(3)).code(),
            absl::StatusCode::kFailedPrecondition);
  // Only the accepted ones are written, in order.
  EXPECT_EQ(WriteAll(*window), (Writes{{1, false}, {2, false}}));
}

TEST(SegmentWindowTest, RejectsNoInitialCredits) {
  EXPECT_EQ(SegmentWindow::Create({kIncarnation, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SegmentWindow::Create({kIncarnation, -3}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SegmentWindowTest, CreditsBoundCollectionAndWrites) {
  auto window = MakeWindow(/*initial_credits=*/2);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  // Two in flight plus the one being collected.
  for (int64_t expected = 1; expected <= 3; ++expected) {
    ASSERT_TRUE(window->HasRoomForNext()) << expected;
    EXPECT_EQ(Collect(*window), expected);
  }
  EXPECT_FALSE(window->HasRoomForNext());
  // Only two may be on the wire before an ack.
  EXPECT_EQ(WriteAll(*window), (Writes{{1, false}, {2, false}}));
  EXPECT_FALSE(window->NextToWrite().has_value());

  // The ack of 1 frees one place; the learner grants 2 again.
  window->OnAck(Ack(1, 2));
  EXPECT_EQ(window->acked(), 1);
  EXPECT_TRUE(window->HasRoomForNext());
  EXPECT_EQ(WriteAll(*window), (Writes{{3, false}}));
  EXPECT_EQ(Collect(*window), 4);
  EXPECT_FALSE(window->HasRoomForNext());
  EXPECT_FALSE(window->NextToWrite().has_value());

  // More credits: more may be collected and written.
  window->OnAck(Ack(1, 5));
  EXPECT_TRUE(window->HasRoomForNext());
  EXPECT_EQ(WriteAll(*window), (Writes{{4, false}}));
}

TEST(SegmentWindowTest, ZeroCreditsStopWritesButNotTheNextCollection) {
  auto window = MakeWindow(/*initial_credits=*/2);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  Collect(*window);
  EXPECT_EQ(WriteAll(*window), (Writes{{1, false}}));
  window->OnAck(Ack(1, 0));
  EXPECT_EQ(window->credits(), 0);
  // The segment after the acked one may still be collected...
  ASSERT_TRUE(window->HasRoomForNext());
  Collect(*window);
  EXPECT_FALSE(window->HasRoomForNext());
  // ...but it waits for credits before it is written.
  EXPECT_FALSE(window->NextToWrite().has_value());
  window->OnAck(Ack(1, 1));
  EXPECT_EQ(WriteAll(*window), (Writes{{2, false}}));
}

TEST(SegmentWindowTest, NegativeCreditsCountAsNone) {
  auto window = MakeWindow(/*initial_credits=*/2);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  Collect(*window);
  window->OnAck(Ack(0, -5));
  EXPECT_EQ(window->credits(), 0);
  EXPECT_FALSE(window->NextToWrite().has_value());
  EXPECT_FALSE(window->HasRoomForNext());
}

TEST(SegmentWindowTest, SegmentCollectedWhileCreditsShrankWaits) {
  auto window = MakeWindow(/*initial_credits=*/2);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  Collect(*window);
  ASSERT_TRUE(window->HasRoomForNext());
  // The learner withdraws its credits while segment 2 is being collected;
  // the collected segment is numbered all the same.
  window->OnAck(Ack(0, 0));
  EXPECT_EQ(Collect(*window), 2);
  EXPECT_FALSE(window->HasRoomForNext());
  EXPECT_TRUE(WriteAll(*window).empty());
  EXPECT_EQ(window->unacked(), 2);
}

// One actor, max_policy_lag 1: the learner takes one segment an update, so
// a segment collected with version v behind k unacknowledged ones is used
// about k versions after the learner's. Before, the actor collected as far
// ahead as its credits allowed, and a third of its segments reached the
// learner too stale to use (CleanRL's shapes: 610 collected, 391 used).
TEST(SegmentWindowTest, AsyncCollectsOnlySegmentsFreshWhenUsed) {
  auto window = MakeWindow(/*initial_credits=*/2);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  // Version 0, nothing ahead, then one ahead: both used within lag 1.
  EXPECT_TRUE(window->FreshWhenUsed(0, /*max_policy_lag=*/1, 1));
  Collect(*window);
  EXPECT_TRUE(window->FreshWhenUsed(0, 1, 1));
  Collect(*window);
  // A third with version 0 would be used at version 2: wait.
  EXPECT_TRUE(window->HasRoomForNext());  // the credits alone would allow it
  EXPECT_FALSE(window->FreshWhenUsed(0, 1, 1));
  // Update 1 used segment 1; the ack says the learner is at version 1.
  RolloutAck ack = Ack(1, 2);
  ack.set_latest_policy_version(1);
  window->OnAck(ack);
  EXPECT_EQ(window->learner_version(), 1);
  // Still with version 0 (version 1 not received yet): 1 + 1 - 0 > 1.
  EXPECT_FALSE(window->FreshWhenUsed(0, 1, 1));
  // With version 1 it is fresh: used at version 2.
  EXPECT_TRUE(window->FreshWhenUsed(1, 1, 1));
  // A larger lag bound lets the actor run further ahead.
  EXPECT_TRUE(window->FreshWhenUsed(0, 2, 1));
  // A learner restarted from an older checkpoint (version 0 again) with a
  // newer policy in the actor: the policy's version counts.
  ack = Ack(1, 2);
  ack.set_latest_policy_version(0);
  window->OnAck(ack);
  EXPECT_TRUE(window->FreshWhenUsed(1, 1, 1));
}

TEST(SegmentWindowTest, AsyncWaitsForThePolicyOfALearnerAlreadyPastTheBound) {
  auto window = MakeWindow(/*initial_credits=*/2);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  Collect(*window);
  RolloutAck ack = Ack(1, 2);
  ack.set_latest_policy_version(3);
  window->OnAck(ack);
  // Nothing unacknowledged, but the learner is at 3: a segment collected
  // with version 1 would be dropped; wait for the newer policy.
  EXPECT_FALSE(window->FreshWhenUsed(1, /*max_policy_lag=*/1, 1));
  EXPECT_TRUE(window->FreshWhenUsed(2, 1, 1));
  // A new stream may reach a restarted learner at an older version: until
  // its first ack, the actor's policy stands for the learner's version.
  window->OnStreamOpened();
  EXPECT_EQ(window->learner_version(), 0);
  EXPECT_TRUE(window->FreshWhenUsed(1, 1, 1));
}

TEST(SegmentWindowTest, AsyncAlwaysAllowsOneBatchOfSegments) {
  // Four actors per learner rank, lag 0: a lone surviving actor may still
  // have a whole batch (4 segments) unacknowledged, else the learner would
  // wait for segments and the actor for an update.
  auto window = MakeWindow(/*initial_credits=*/5);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(window->FreshWhenUsed(3, /*max_policy_lag=*/0, 4)) << i;
    Collect(*window);
  }
  EXPECT_FALSE(window->FreshWhenUsed(3, 0, 4));
  // With lag 1, a second batch's worth.
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(window->FreshWhenUsed(3, 1, 4)) << i;
    Collect(*window);
  }
  EXPECT_FALSE(window->FreshWhenUsed(3, 1, 4));
}

TEST(SegmentWindowTest, AcksAreCumulativeAndFreeTheWindow) {
  auto window = MakeWindow(/*initial_credits=*/8);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  for (int i = 0; i < 5; ++i) Collect(*window);
  EXPECT_EQ(WriteAll(*window).size(), 5u);
  window->OnAck(Ack(3, 8));
  EXPECT_EQ(window->acked(), 3);
  EXPECT_EQ(window->unacked(), 2);
  EXPECT_FALSE(window->AllAcked());
  window->OnAck(Ack(5, 8));
  EXPECT_EQ(window->acked(), 5);
  EXPECT_EQ(window->unacked(), 0);
  EXPECT_TRUE(window->AllAcked());
  // Nothing is left to resend on a new stream.
  window->OnStreamOpened();
  EXPECT_FALSE(window->NextToWrite().has_value());
}

TEST(SegmentWindowTest, OldAndRepeatedAcksAreHarmlessButCarryCredits) {
  auto window = MakeWindow(/*initial_credits=*/4);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  for (int i = 0; i < 4; ++i) Collect(*window);
  EXPECT_EQ(WriteAll(*window).size(), 4u);
  window->OnAck(Ack(3, 4));
  window->OnAck(Ack(3, 4));
  window->OnAck(Ack(1, 4));
  window->OnAck(Ack(0, 4));
  EXPECT_EQ(window->acked(), 3);
  EXPECT_EQ(window->unacked(), 1);
  // The newest word on credits counts even on an old ack.
  window->OnAck(Ack(2, 1));
  EXPECT_EQ(window->acked(), 3);
  EXPECT_EQ(window->credits(), 1);
  // Segment 4 is still there to be resent.
  window->OnStreamOpened();
  EXPECT_EQ(WriteAll(*window), (Writes{{4, true}}));
}

TEST(SegmentWindowTest, AckAheadOfAddedSegmentsCountsOnlyWhatWasAdded) {
  auto window = MakeWindow(/*initial_credits=*/4);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  Collect(*window);
  Collect(*window);
  // Assigned but not yet encoded: the learner cannot have it.
  window->AssignNext();
  WriteAll(*window);
  window->OnAck(Ack(10, 4));
  EXPECT_EQ(window->acked(), 2);
  EXPECT_FALSE(window->AllAcked());
  // Segment 3 is added, written and acknowledged normally.
  ASSERT_TRUE(window->Add(Segment(3)).ok());
  EXPECT_EQ(WriteAll(*window), (Writes{{3, false}}));
  window->OnAck(Ack(3, 4));
  EXPECT_TRUE(window->AllAcked());
}

TEST(SegmentWindowTest, ReconnectResendsEverythingUnackedInOrder) {
  auto window = MakeWindow(/*initial_credits=*/2);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  for (int i = 0; i < 3; ++i) Collect(*window);
  // No ack on the first stream: 1 and 2 written, 3 waits for credits.
  EXPECT_EQ(WriteAll(*window), (Writes{{1, false}, {2, false}}));

  // The stream breaks; a new one starts over from the oldest unacked, with
  // the initial credits, and the numbers stay.
  window->OnStreamOpened();
  EXPECT_EQ(WriteAll(*window), (Writes{{1, true}, {2, true}}));
  window->OnAck(Ack(2, 4));
  Collect(*window);
  EXPECT_EQ(WriteAll(*window), (Writes{{3, false}, {4, false}}));

  // Broken again after 3 and 4 were written but before their acks.
  window->OnStreamOpened();
  EXPECT_EQ(window->credits(), 2);
  EXPECT_EQ(WriteAll(*window), (Writes{{3, true}, {4, true}}));
}

TEST(SegmentWindowTest, ReconnectSkipsWhatTheLearnerAckedBeforeTheWrite) {
  auto window = MakeWindow(/*initial_credits=*/4);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  for (int i = 0; i < 3; ++i) Collect(*window);
  EXPECT_EQ(WriteAll(*window).size(), 3u);
  window->OnStreamOpened();
  // The learner had 1 and 2 from the old stream and says so first.
  window->OnAck(Ack(2, 4));
  EXPECT_EQ(WriteAll(*window), (Writes{{3, true}}));
}

TEST(SegmentWindowTest, AckDuringAWriteIsHarmless) {
  auto window = MakeWindow(/*initial_credits=*/4);
  ASSERT_NE(window, nullptr);
  window->OnStreamOpened();
  Collect(*window);
  Collect(*window);
  std::optional<SegmentWindow::Write> write = window->NextToWrite();
  ASSERT_TRUE(write.has_value());
  EXPECT_EQ(write->sequence_number, 1);
  // Acknowledged (from an earlier stream) while the write was under way.
  window->OnAck(Ack(1, 4));
  window->OnWritten(write->sequence_number);
  EXPECT_EQ(WriteAll(*window), (Writes{{2, false}}));
}

}  // namespace
}  // namespace rl
