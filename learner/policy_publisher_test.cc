#include "learner/policy_publisher.h"

#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

std::shared_ptr<const PolicyUpdate> Version(int64_t v) {
  auto update = std::make_shared<PolicyUpdate>();
  update->set_version(v);
  return update;
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

}  // namespace
}  // namespace rl
