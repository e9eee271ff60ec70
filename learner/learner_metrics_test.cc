#include "learner/learner_metrics.h"

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

// Every name once, in the learner's namespace; Prometheus counters end in
// _total; a family has help and a type.
TEST(LearnerMetricsTest, TheTableNamesEachFigureOnce) {
  std::set<std::string> series, families;
  for (const auto& m : LearnerMetricTable()) {
    ASSERT_TRUE(m.series != nullptr || m.family != nullptr);
    if (m.series != nullptr) {
      EXPECT_TRUE(absl::StartsWith(m.series, "learner/")) << m.series;
      EXPECT_TRUE(series.insert(m.series).second) << m.series;
    }
    if (m.family == nullptr) continue;
    const std::string family = m.family;
    EXPECT_TRUE(absl::StartsWith(family, "learner_")) << family;
    EXPECT_TRUE(families.insert(family).second) << family;
    ASSERT_NE(m.help, nullptr) << family;
    ASSERT_NE(m.type, nullptr) << family;
    EXPECT_EQ(absl::EndsWith(family, "_total"),
              std::string(m.type) == "counter")
        << family;
  }
  // What dashboards and docs/telemetry.md name.
  for (const char* name :
       {"learner/steps_per_second", "learner/policy_lag", "learner/queue_depth",
        "learner/segments_per_update", "learner/segments_dropped_stale",
        "learner/policy_version", "learner/connected_actors",
        "learner/nonfinite_updates", "learner/mean_return"}) {
    EXPECT_EQ(series.count(name), 1u) << name;
  }
  EXPECT_EQ(families.count("learner_env_steps_total"), 1u);
}

// Figures only an update has are left out of a status read at a scrape.
TEST(LearnerMetricsTest, FiguresOfAStatusAloneLeaveTheUpdatesOut) {
  LearnerFigures figures;
  figures.status.set_policy_version(4);
  for (const auto& m : LearnerMetricTable()) {
    const double value = m.value(figures);
    if (m.family != nullptr) {
      EXPECT_FALSE(std::isnan(value)) << m.family;
    } else if (std::string(m.series) != "learner/mean_return") {
      EXPECT_TRUE(std::isnan(value)) << m.series;
    }
  }
}

}  // namespace
}  // namespace rl
