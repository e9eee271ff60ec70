#include "learner/segment_budget.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

TEST(SegmentBudgetTest, OneSegmentIsAdmittedWhenNoneWaitsWhateverItsSize) {
  SegmentBudget budget(100);
  EXPECT_OK(budget.Take(1000));  // none waits: admitted
  EXPECT_THAT(budget.Take(1),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("(--max_inflight_segment_mb)")));
  EXPECT_EQ(budget.refused(), 1);
  budget.Give(1000);
  EXPECT_OK(budget.Take(60));
  EXPECT_OK(budget.Take(40));
  EXPECT_FALSE(budget.Take(1).ok());
  EXPECT_EQ(budget.held_bytes(), 100);
  EXPECT_EQ(budget.refused(), 2);
}

}  // namespace
}  // namespace rl
