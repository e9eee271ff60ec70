#include "learner/actor_returns.h"

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// `n` returns around `mean` (normal, sd `sd`), from a seeded stream.
std::vector<float> Returns(std::mt19937& rng, int n, double mean, double sd) {
  std::normal_distribution<double> d(mean, sd);
  std::vector<float> out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<float>(d(rng)));
  return out;
}

// Three honest actors on the same policy: nobody stands apart, whatever the
// seed.
TEST(ActorReturnsTest, HonestActorsDoNotStandApart) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    ActorReturns returns;
    for (int update = 0; update < 30; ++update) {
      for (int actor = 0; actor < 3; ++actor) {
        returns.Add(actor, Returns(rng, 4, 23.0, 12.0));
      }
      returns.EndUpdate();
      EXPECT_TRUE(returns.NewlyApart().empty()) << "seed " << seed;
    }
    const auto summaries = returns.Summaries();
    ASSERT_EQ(summaries.size(), 3u);
    for (const auto& s : summaries) {
      EXPECT_EQ(s.episodes, 80);  // 20 updates x 4 episodes
      EXPECT_EQ(s.actors_compared, 3);
      EXPECT_LT(std::abs(s.z), 6.0);
      EXPECT_FALSE(s.stands_apart);
    }
  }
}

// Issue 46's case: a placed actor reports in-range episodes far above the
// real ones (264 against 23). It is named once, with its figures, and the
// honest actors are not.
TEST(ActorReturnsTest, AForgingActorIsNamedOnce) {
  std::mt19937 rng(7);
  ActorReturns returns;
  std::vector<ActorReturns::Summary> named;
  for (int update = 0; update < 10; ++update) {
    returns.Add(0, Returns(rng, 3, 23.0, 10.0));
    returns.Add(1, Returns(rng, 3, 23.0, 10.0));
    returns.Add(7, std::vector<float>(5, 264.0f));  // constant forgeries
    returns.EndUpdate();
    for (const auto& s : returns.NewlyApart()) named.push_back(s);
  }
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].actor_id, 7);
  EXPECT_NEAR(named[0].mean, 264.0, 1e-3);
  EXPECT_GT(named[0].z, 6.0);
  EXPECT_THAT(ActorReturns::Describe(named[0], 20), HasSubstr("actor 7's"));
  EXPECT_THAT(ActorReturns::Describe(named[0], 20),
              HasSubstr("average 264.0 against"));
  for (const auto& s : returns.Summaries()) {
    EXPECT_EQ(s.stands_apart, s.actor_id == 7) << s.actor_id;
  }
}

// Too few episodes say nothing; an actor that stops forging leaves the
// window and is reported again if it starts over.
TEST(ActorReturnsTest, WindowAndMinimumEpisodes) {
  ActorReturns::Options options;
  options.window_updates = 3;
  ActorReturns returns(options);
  returns.Add(0, std::vector<float>(5, 20.0f));
  returns.Add(1, std::vector<float>(5, 500.0f));
  returns.EndUpdate();
  // 5 episodes each: under min_episodes (10).
  EXPECT_TRUE(returns.NewlyApart().empty());
  returns.Add(0, {19.0f, 21.0f, 20.0f, 22.0f, 18.0f});
  returns.Add(1, std::vector<float>(5, 500.0f));
  returns.EndUpdate();
  // With two actors each stands apart from the other: both are named.
  EXPECT_EQ(returns.NewlyApart().size(), 2u);
  EXPECT_TRUE(returns.NewlyApart().empty());  // once
  for (int update = 0; update < 3; ++update) {
    returns.Add(0, {19.0f, 21.0f, 20.0f, 22.0f, 18.0f});
    returns.Add(1, {18.0f, 22.0f, 20.0f, 21.0f, 19.0f});
    returns.EndUpdate();
  }
  EXPECT_TRUE(returns.NewlyApart().empty());
  for (const auto& s : returns.Summaries()) {
    EXPECT_FALSE(s.stands_apart) << s.actor_id;
    EXPECT_EQ(s.episodes, 15);  // 3 updates in the window
  }
  for (int update = 0; update < 3; ++update) {
    returns.Add(0, {19.0f, 21.0f, 20.0f, 22.0f, 18.0f});
    returns.Add(1, std::vector<float>(5, 500.0f));
    returns.EndUpdate();
  }
  EXPECT_EQ(returns.NewlyApart().size(), 2u);
  // Non-finite returns are not counted.
  ActorReturns other;
  other.Add(3, {1.0f, std::nanf(""), 2.0f});
  other.EndUpdate();
  ASSERT_EQ(other.Summaries().size(), 1u);
  EXPECT_EQ(other.Summaries()[0].episodes, 2);
}

}  // namespace
}  // namespace rl
