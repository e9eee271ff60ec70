#include "telemetry/client/metric_table.h"

#include <cmath>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "telemetry/client/recording_transport.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Figures {
  double version = 0;
  double lag = std::nan("");
};

const std::vector<MetricEntry<Figures>>& Table() {
  static const auto* table = new std::vector<MetricEntry<Figures>>{
      {"demo/policy_version", "demo_policy_version", "Policy version.", "gauge",
       [](const Figures& f) { return f.version; }},
      {"demo/policy_lag", nullptr, nullptr, nullptr,
       [](const Figures& f) { return f.lag; }},
      {nullptr, "demo_versions_total", "Versions seen.", "counter",
       [](const Figures& f) { return f.version; }},
  };
  return *table;
}

TEST(MetricTableTest, SeriesGoToTheEmitterAndNaNIsLeftOut) {
  auto sent = std::make_shared<SentPoints>();
  EmitterOptions options;
  options.source = "test";
  options.batch_interval = absl::Milliseconds(10);
  Emitter emitter(std::make_unique<RecordingTransport>(sent), options);
  emitter.SetRun("run-1");
  EmitMetricTable(&emitter, 5, Table(), Figures{7, std::nan("")});
  ASSERT_OK(emitter.Flush(absl::Seconds(10)));
  absl::MutexLock lock(&sent->mu);
  // No lag (NaN), no series for the counter.
  ASSERT_EQ(sent->points.size(), 1u);
  EXPECT_EQ(sent->points[0].name(), "demo/policy_version");
  EXPECT_EQ(sent->points[0].value(), 7);
}

TEST(MetricTableTest, FamiliesAreSampledPerScrapeWithTheRunLabel) {
  MetricsRegistry registry;
  std::optional<std::pair<std::string, Figures>> now;
  RegisterMetricTable<Figures>(&registry, Table(), [&now] { return now; });
  std::string text = registry.RenderText();
  EXPECT_THAT(text, Not(HasSubstr("demo_policy_version{")));  // no run yet
  now = std::make_pair(std::string("run-1"), Figures{3, 1.5});
  text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("# TYPE demo_policy_version gauge"));
  EXPECT_THAT(text, HasSubstr("demo_policy_version{run=\"run-1\"} 3"));
  EXPECT_THAT(text, HasSubstr("# TYPE demo_versions_total counter"));
  EXPECT_THAT(text, HasSubstr("demo_versions_total{run=\"run-1\"} 3"));
  EXPECT_THAT(text, Not(HasSubstr("policy_lag")));  // telemetry only
}

struct Census {
  int running = 0;
  int failed = 0;
};

const std::vector<MetricEntry<Census>>& CensusTable() {
  static const auto* table = new std::vector<MetricEntry<Census>>{
      {"demo/runs", "demo_runs", "Runs by state.", "gauge", nullptr,
       [](const Census& c) {
         return MetricSamples{{{{"state", "RUNNING"}}, double(c.running)},
                              {{{"state", "FAILED"}}, double(c.failed)}};
       }},
      {nullptr, "demo_total_runs", "Runs.", "gauge",
       [](const Census& c) { return double(c.running + c.failed); }},
  };
  return *table;
}

TEST(MetricTableTest, LabelledEntriesExportEveryLabelSet) {
  MetricsRegistry registry;
  Census census{2, 1};
  RegisterProcessMetricTable<Census>(&registry, CensusTable(),
                                     [&census] { return census; });
  std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("demo_runs{state=\"RUNNING\"} 2"));
  EXPECT_THAT(text, HasSubstr("demo_runs{state=\"FAILED\"} 1"));
  EXPECT_THAT(text, HasSubstr("demo_total_runs 3"));
  census.failed = 4;  // read again at the next scrape
  text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("demo_runs{state=\"FAILED\"} 4"));
  EXPECT_THAT(text, HasSubstr("demo_total_runs 6"));

  RegisterMetricTable<Census>(
      &registry,
      {{nullptr, "demo_run_states", "Per run.", "gauge", nullptr,
        [](const Census& c) {
          return MetricSamples{{{{"state", "RUNNING"}}, double(c.running)}};
        }}},
      [&census] { return std::make_pair(std::string("run-9"), census); });
  text = registry.RenderText();
  EXPECT_THAT(text,
              HasSubstr("demo_run_states{run=\"run-9\",state=\"RUNNING\"} 2"));
}

}  // namespace
}  // namespace rl
