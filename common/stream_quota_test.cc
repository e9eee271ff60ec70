#include "common/stream_quota.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

StreamQuotaOptions Options(int total, int per_client) {
  StreamQuotaOptions o;
  o.max_total = total;
  o.max_per_client = per_client;
  o.server = "this learner";
  o.total_flag = "--max_streams";
  o.per_client_flag = "--max_streams_per_client";
  return o;
}

TEST(StreamQuotaTest, OneClientCannotTakeEveryPlace) {
  StreamQuota quota(Options(4, 2));
  std::vector<std::unique_ptr<StreamPlace>> held;
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(auto place, quota.Take("worker@ipv4:10.0.0.1"));
    held.push_back(std::move(place));
  }
  EXPECT_THAT(quota.Take("worker@ipv4:10.0.0.1"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("client worker@ipv4:10.0.0.1 has 2 "
                                       "open streams to this learner"),
                             HasSubstr("--max_streams_per_client"))));
  EXPECT_EQ(quota.refused_per_client(), 1);
  // Another client still gets in.
  ASSERT_OK_AND_ASSIGN(auto other, quota.Take("worker@ipv4:10.0.0.2"));
  EXPECT_EQ(quota.open(), 3);
  EXPECT_EQ(quota.open("worker@ipv4:10.0.0.1"), 2);
  // A place given back is a place again.
  held.pop_back();
  EXPECT_EQ(quota.open("worker@ipv4:10.0.0.1"), 1);
  EXPECT_OK(quota.Take("worker@ipv4:10.0.0.1").status());
}

TEST(StreamQuotaTest, TheServerWideLimitHoldsAcrossClients) {
  StreamQuota quota(Options(2, 2));
  ASSERT_OK_AND_ASSIGN(auto a, quota.Take("a"));
  ASSERT_OK_AND_ASSIGN(auto b, quota.Take("b"));
  EXPECT_THAT(quota.Take("c"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("this learner has 2 open streams, at "
                                       "most 2"),
                             HasSubstr("--max_streams)"))));
  EXPECT_EQ(quota.refused_total(), 1);
  EXPECT_EQ(quota.refused_per_client(), 0);
  a.reset();
  EXPECT_OK(quota.Take("c").status());
}

TEST(StreamQuotaTest, APlaceMayOutliveItsQuota) {
  std::unique_ptr<StreamPlace> place;
  {
    StreamQuota quota(Options(1, 1));
    ASSERT_OK_AND_ASSIGN(place, quota.Take("a"));
  }
  place.reset();  // no use after free (ASan would say)
}

}  // namespace
}  // namespace rl
