#include "learner/return_window.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(ReturnWindowTest, KeepsTheNewestHundredAndReachesATargetOnlyWhenFull) {
  ReturnWindow window;
  EXPECT_TRUE(std::isnan(window.Mean()));
  for (int i = 0; i < 99; ++i) window.Add(500.0f);
  EXPECT_FALSE(window.full());
  EXPECT_FALSE(window.Reaches(475.0));  // 99 episodes are not enough
  window.Add(500.0f);
  EXPECT_TRUE(window.Reaches(475.0));
  for (int i = 0; i < 100; ++i) window.Add(static_cast<float>(i));
  EXPECT_DOUBLE_EQ(window.Mean(), 49.5);  // the 500s are gone
  EXPECT_FALSE(window.Reaches(475.0));
  EXPECT_EQ(*window.begin(), 0.0f);

  const std::vector<float> saved(window.begin(), window.end());
  ReturnWindow restored;
  restored.Assign(saved.begin(), saved.end());
  EXPECT_DOUBLE_EQ(restored.Mean(), 49.5);
  EXPECT_TRUE(restored.full());
}

}  // namespace
}  // namespace rl
