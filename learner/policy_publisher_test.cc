#include "learner/policy_publisher.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

// Version `v`, its one parameter named after it.
std::shared_ptr<const PolicyUpdate> Version(int64_t v) {
  auto update = std::make_shared<PolicyUpdate>();
  update->set_version(v);
  update->add_parameters()->set_name("weights of version " + std::to_string(v));
  return update;
}

// The league_pool of LatestWithLeaguePool: (league version, the name of
// its parameter); `*latest_version`: the version it carries.
std::vector<std::pair<int64_t, std::string>> FirstPool(
    PolicyPublisher& publisher, int64_t* latest_version) {
  const std::shared_ptr<const PolicyUpdate> latest =
      publisher.LatestWithLeaguePool();
  *latest_version = latest->version();
  std::vector<std::pair<int64_t, std::string>> pool;
  for (const LeagueVersionParameters& v : latest->league_pool()) {
    pool.emplace_back(v.version(), v.parameters(0).name());
  }
  return pool;
}

TEST(PolicyPublisherTest, SubscribersGetTheLatestThenEveryVersion) {
  PolicyPublisher publisher;
  std::shared_ptr<const PolicyUpdate> latest;
  std::vector<int64_t> seen;
  const int64_t id = publisher.Subscribe(
      [&](std::shared_ptr<const PolicyUpdate> u) {
        seen.push_back(u->version());
      },
      &latest);
  EXPECT_EQ(latest, nullptr);
  publisher.Publish(Version(1));
  const auto two = Version(2);
  publisher.Publish(two);
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(publisher.Latest(), two);  // the same message, not a copy

  std::shared_ptr<const PolicyUpdate> late_latest;
  std::vector<int64_t> late;
  publisher.Subscribe(
      [&](std::shared_ptr<const PolicyUpdate> u) {
        late.push_back(u->version());
      },
      &late_latest);
  EXPECT_EQ(late_latest, two);
  publisher.Unsubscribe(id);
  publisher.Publish(Version(3));
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(late, (std::vector<int64_t>{3}));
}

// A league's versions: version k is the first published at or past
// k x snapshot_interval updates (version v: v - 1 updates), the newest
// pool_size kept; a new subscriber's first update carries those older than
// the version the latest stands for, and the latest's own weights.
TEST(PolicyPublisherTest, ANewSubscriberGetsTheLeaguesKeptVersions) {
  PolicyPublisher publisher;
  publisher.KeepLeagueVersions(/*snapshot_interval=*/2, /*pool_size=*/4);
  int64_t latest = 0;
  publisher.Publish(Version(1));  // 0 updates: league version 0
  EXPECT_TRUE(FirstPool(publisher, &latest).empty());  // it is its own
  // Version 5 (4 updates) is skipped, so league version 2 is version 6.
  for (int64_t v : {2, 3, 4, 6, 7, 8, 9}) publisher.Publish(Version(v));
  using Pool = std::vector<std::pair<int64_t, std::string>>;
  // Kept: 1 (version 3), 2 (6), 3 (7), 4 (9); version 0 left the pool.
  EXPECT_EQ(FirstPool(publisher, &latest), (Pool{{1, "weights of version 3"},
                                                 {2, "weights of version 6"},
                                                 {3, "weights of version 7"}}));
  EXPECT_EQ(latest, 9);  // league version 4, frozen by the actor itself
  publisher.Publish(Version(10));  // still league version 4
  EXPECT_EQ(FirstPool(publisher, &latest).size(), 3u);
  publisher.Publish(Version(11));  // 10 updates: league version 5
  EXPECT_EQ(FirstPool(publisher, &latest), (Pool{{2, "weights of version 6"},
                                                 {3, "weights of version 7"},
                                                 {4, "weights of version 9"}}));
  // Made once per version and shared; a new version makes it again.
  EXPECT_EQ(publisher.LatestWithLeaguePool(), publisher.LatestWithLeaguePool());
  const auto before = publisher.LatestWithLeaguePool();
  // The final twin of a version adds nothing, and what every subscriber
  // shares carries no pool.
  auto final_twin = std::make_shared<PolicyUpdate>(*Version(11));
  final_twin->set_final(true);
  publisher.Publish(final_twin);
  EXPECT_NE(publisher.LatestWithLeaguePool(), before);
  EXPECT_TRUE(publisher.LatestWithLeaguePool()->final());
  EXPECT_EQ(FirstPool(publisher, &latest).size(), 3u);
  EXPECT_EQ(publisher.Latest()->league_pool_size(), 0);
  std::shared_ptr<const PolicyUpdate> subscribed;
  publisher.Subscribe([](std::shared_ptr<const PolicyUpdate>) {}, &subscribed);
  EXPECT_EQ(subscribed, final_twin);
}

// Kept versions that would take the update past max_update_bytes are left
// out, the oldest first.
TEST(PolicyPublisherTest, TheKeptVersionsSentStayWithinTheMessageBudget) {
  const int64_t one = static_cast<int64_t>(Version(10)->ByteSizeLong());
  PolicyPublisher publisher;
  // Room for the latest and two versions (each about as large).
  publisher.KeepLeagueVersions(1, 10, 3 * one + 2);
  for (int64_t v = 1; v <= 6; ++v) publisher.Publish(Version(v));
  int64_t latest = 0;
  using Pool = std::vector<std::pair<int64_t, std::string>>;
  EXPECT_EQ(FirstPool(publisher, &latest),
            (Pool{{3, "weights of version 4"}, {4, "weights of version 5"}}));
  EXPECT_EQ(latest, 6);
  // No room for any: the latest alone, as every subscriber gets it.
  PolicyPublisher tight;
  tight.KeepLeagueVersions(1, 10, one);
  for (int64_t v = 1; v <= 6; ++v) tight.Publish(Version(v));
  EXPECT_EQ(tight.LatestWithLeaguePool(), tight.Latest());
}

TEST(PolicyPublisherTest, WithoutALeagueNoPoolIsSent) {
  PolicyPublisher publisher;
  EXPECT_EQ(publisher.LatestWithLeaguePool(), nullptr);
  for (int64_t v = 1; v <= 5; ++v) publisher.Publish(Version(v));
  EXPECT_EQ(publisher.LatestWithLeaguePool(), publisher.Latest());
}

// What a checkpoint keeps (the newest versions within the budget) comes
// back in a new publisher, which sends them as the first one did and keeps
// numbering after them.
TEST(PolicyPublisherTest, KeptVersionsComeBackAfterARestore) {
  const int64_t one = static_cast<int64_t>(Version(10)->ByteSizeLong());
  PolicyPublisher publisher;
  publisher.KeepLeagueVersions(1, 4, 3 * one + 2);
  EXPECT_TRUE(publisher.KeptLeagueVersions().empty());
  for (int64_t v = 1; v <= 6; ++v) publisher.Publish(Version(v));
  // Kept 2 to 5; three fit the budget.
  std::vector<LeagueVersionParameters> kept = publisher.KeptLeagueVersions();
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].version(), 3);
  EXPECT_EQ(kept[0].parameters(0).name(), "weights of version 4");
  EXPECT_EQ(kept[2].version(), 5);

  PolicyPublisher resumed;
  resumed.KeepLeagueVersions(1, /*pool_size=*/2, 3 * one + 2);
  resumed.RestoreLeagueVersions(kept);  // the newest 2 stay
  resumed.Publish(Version(6));          // version 5 again: not kept twice
  int64_t latest = 0;
  using Pool = std::vector<std::pair<int64_t, std::string>>;
  EXPECT_EQ(FirstPool(resumed, &latest), (Pool{{4, "weights of version 5"}}));
  resumed.Publish(Version(7));
  EXPECT_EQ(FirstPool(resumed, &latest), (Pool{{5, "weights of version 6"}}));
  EXPECT_EQ(latest, 7);
  ASSERT_EQ(resumed.KeptLeagueVersions().size(), 2u);
  EXPECT_EQ(resumed.KeptLeagueVersions()[1].parameters(0).name(),
            "weights of version 7");
}

}  // namespace
}  // namespace rl
