#include "learner/segment_ledger.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(SegmentLedgerTest, WritesWhatTheAuditReadsBack) {
  const std::string path = SegmentLedgerPath(MakeTestDir(), 0);
  {
    ASSERT_OK_AND_ASSIGN(SegmentLedger ledger, SegmentLedger::Open(path));
    ledger.Resume(0);
    ledger.Update(1, {{0, 0xF00DF00DF00DF00Dull, 1}, {1, 7, 1}});
    ledger.Update(2, {{0, 0xF00DF00DF00DF00Dull, 2}});
    EXPECT_EQ(ledger.failed_writes(), 0);
  }
  {
    // A restarted learner appends.
    ASSERT_OK_AND_ASSIGN(SegmentLedger ledger, SegmentLedger::Open(path));
    ledger.Resume(1);
    ledger.Update(2, {{0, 0xF00DF00DF00DF00Dull, 2}});  // resent, used again
  }
  EXPECT_THAT(ReadTestFile(path),
              HasSubstr("update 1 0/f00df00df00df00d/1 1/7/1"));
  const SegmentLedgerAudit audit = AuditSegmentLedger(ReadTestFile(path));
  EXPECT_THAT(audit.violations, IsEmpty());
  EXPECT_EQ(audit.updates, 2);
  EXPECT_EQ(audit.segments, 3);
  EXPECT_EQ(audit.resumes, 2);
  EXPECT_EQ(audit.rolled_back, 1);
}

TEST(SegmentLedgerTest, ASegmentUsedTwiceInTheLineageIsAViolation) {
  const SegmentLedgerAudit audit = AuditSegmentLedger(
      "resume 0\nupdate 1 0/a/1\nupdate 2 0/a/2\nresume 2\nupdate 3 0/a/2\n");
  EXPECT_THAT(audit.violations,
              ElementsAre(HasSubstr("segment 2 of actor 0 (process a) was "
                                    "used by update 2 and again by update 3")));
}

TEST(SegmentLedgerTest, GapsRepeatsAndGarbageAreViolations) {
  EXPECT_THAT(AuditSegmentLedger("update 1 0/a/1\nupdate 3 0/a/2\n").violations,
              ElementsAre(HasSubstr("line 2 records update 3, expected 2")));
  EXPECT_THAT(AuditSegmentLedger("update 1 0/a/1\nresume 4\n").violations,
              ElementsAre(HasSubstr("resumes at update 4")));
  EXPECT_THAT(AuditSegmentLedger("update 1 0/a\nupdat 2\n").violations,
              ElementsAre(HasSubstr("bad segment \"0/a\""),
                          HasSubstr("line 2 is malformed")));
}

TEST(SegmentLedgerTest, AcknowledgedSegmentsMustHaveBeenUsedOrDropped) {
  const std::string path = SegmentLedgerPath(MakeTestDir(), 0);
  {
    ASSERT_OK_AND_ASSIGN(SegmentLedger ledger, SegmentLedger::Open(path));
    ledger.Resume(0);
    ledger.Update(1, {{0, 0xab, 1}});
    ledger.Drop({0, 0xab, 2});
    ledger.Update(2, {{0, 0xab, 3}});
    ledger.Resume(1);  // update 2 rolled back: segment 3 was still used
  }
  const SegmentLedgerAudit audit = AuditSegmentLedger(ReadTestFile(path));
  EXPECT_THAT(audit.violations, IsEmpty());
  EXPECT_EQ(audit.processed.size(), 3);

  const std::string log =
      "2026-11-24 [actor] info actor 0 of run run-000007 stopped (final "
      "policy) [process ab]: 4 segments collected, 4 sent (0 resent), "
      "acknowledged up to segment 3, 0 reconnects, 3 policy updates, latest "
      "version 3\n"
      "2026-11-24 [actor] info actor 0 of run run-000008 stopped (UNAVAILABLE:"
      " x (y) [z]) [process cd]: 9 segments collected, 9 sent (0 resent), "
      "acknowledged up to segment 9, 0 reconnects, 3 policy updates, latest "
      "version 3\n";
  const std::vector<ActorAcknowledgement> acks =
      ParseActorAcknowledgements(log, "run-000007");
  ASSERT_EQ(acks.size(), 1);
  EXPECT_EQ(acks[0].incarnation, 0xabu);
  EXPECT_EQ(acks[0].acknowledged, 3);
  EXPECT_THAT(CheckAcknowledged(audit, acks), IsEmpty());

  // The other run's line parses too (parentheses in its status); its
  // acknowledgements are not in this ledger: acknowledged, then lost.
  const std::vector<ActorAcknowledgement> other =
      ParseActorAcknowledgements(log, "run-000008");
  ASSERT_EQ(other.size(), 1);
  EXPECT_THAT(CheckAcknowledged(audit, other),
              ElementsAre(HasSubstr("saw segments up to 9 acknowledged, but 9 "
                                    "of them (the first: 1) were never used")));
}

TEST(SegmentLedgerTest, AFailedWriteIsCountedNotFatal) {
  ASSERT_OK_AND_ASSIGN(SegmentLedger ledger, SegmentLedger::Open("/dev/full"));
  ledger.Resume(0);
  ledger.Update(1, {{0, 1, 1}});
  EXPECT_EQ(ledger.failed_writes(), 2);
}

TEST(SegmentLedgerTest, AnUnwritablePathIsAClearError) {
  EXPECT_THAT(SegmentLedger::Open("/nonexistent/dir/segments.rank0.log"),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("/nonexistent/dir/segments.rank0.log")));
}

}  // namespace
}  // namespace rl
