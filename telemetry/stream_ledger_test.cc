#include "telemetry/stream_ledger.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(StreamLedgerTest, ResendsAreKnownAndFailedWritesFillLater) {
  StreamLedger ledger;
  EXPECT_FALSE(ledger.Has(1));
  ledger.Add(1);
  ledger.Add(2);
  EXPECT_TRUE(ledger.Has(1));
  EXPECT_TRUE(ledger.Has(2));
  // Batches 3 and 4 failed to write; 5 was stored.
  ledger.Add(5);
  EXPECT_FALSE(ledger.Has(3));
  EXPECT_FALSE(ledger.Has(4));
  EXPECT_TRUE(ledger.Has(5));
  EXPECT_FALSE(ledger.Has(6));
  // 4's resend fills its place; 3 is still missing.
  ledger.Add(4);
  EXPECT_TRUE(ledger.Has(4));
  EXPECT_FALSE(ledger.Has(3));
  ledger.Add(3);
  EXPECT_TRUE(ledger.gaps.empty());
  for (int64_t seq = 1; seq <= 5; ++seq) EXPECT_TRUE(ledger.Has(seq)) << seq;
}

TEST(StreamLedgerTest, AGapInTheMiddleOfARangeSplitsIt) {
  StreamLedger ledger;
  ledger.Add(10);  // 1..9 missing
  ledger.Add(5);
  EXPECT_TRUE(ledger.Has(5));
  EXPECT_FALSE(ledger.Has(4));
  EXPECT_FALSE(ledger.Has(6));
  ASSERT_EQ(ledger.gaps.size(), 2u);
  EXPECT_EQ(ledger.gaps[0], std::make_pair(int64_t{1}, int64_t{4}));
  EXPECT_EQ(ledger.gaps[1], std::make_pair(int64_t{6}, int64_t{9}));
}

TEST(StreamLedgerTest, OnlyTheNewestGapsAreKept) {
  StreamLedger ledger;
  for (int64_t i = 1; i <= 200; ++i) ledger.Add(2 * i);  // every odd missing
  EXPECT_EQ(ledger.gaps.size(), StreamLedger::kMaxGaps);
  EXPECT_TRUE(ledger.Has(1));     // forgotten: taken for a duplicate
  EXPECT_FALSE(ledger.Has(399));  // kept
}

}  // namespace
}  // namespace rl
