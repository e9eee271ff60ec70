#include "common/latest_write.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(LatestWriteTest, OneWriteInFlightAndTheNewestWaiting) {
  LatestWrite<int> slot;
  EXPECT_TRUE(slot.Offer(1));  // nothing in flight: write now
  EXPECT_EQ(slot.Start(), 1);
  EXPECT_TRUE(slot.writing());
  EXPECT_FALSE(slot.Offer(2));  // in flight: it waits
  EXPECT_FALSE(slot.Offer(3));  // and the newer replaces it
  EXPECT_TRUE(slot.Done());
  EXPECT_EQ(slot.Start(), 3);
  EXPECT_FALSE(slot.Done());  // nothing waits
  EXPECT_FALSE(slot.writing());
  EXPECT_FALSE(slot.has_waiting());
}

TEST(LatestWriteTest, ANewerRuleKeepsAWaitingMessageThatIsNewer) {
  // Pairs of (generation, payload): an older generation never replaces.
  LatestWrite<std::pair<int, char>> slot(
      [](const auto& waiting, const auto& incoming) {
        return incoming.first >= waiting.first;
      });
  EXPECT_TRUE(slot.Offer({1, 'a'}));
  slot.Start();
  slot.Offer({5, 'b'});
  slot.Offer({4, 'c'});  // older than what waits: dropped
  slot.Offer({5, 'd'});  // same generation: replaces
  ASSERT_TRUE(slot.Done());
  EXPECT_EQ(slot.Start(), std::make_pair(5, 'd'));
}

}  // namespace
}  // namespace rl
