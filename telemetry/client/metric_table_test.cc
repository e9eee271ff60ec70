#include "telemetry/client/metric_table.h"

#include <cmath>
#include <deque>
#include <map>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

// Records what the emitter sends and acknowledges it at once.
class RecordingTransport : public MetricTransport {
 public:
  explicit RecordingTransport(std::map<std::string, double>* seen,
                              absl::Mutex* mu)
      : seen_(seen), mu_(mu) {}
  absl::Status Connect() override {
    absl::MutexLock lock(mu_);
    closed_ = false;
    acks_.clear();
    return absl::OkStatus();
  }
  bool Send(const MetricBatch& batch) override {
    absl::MutexLock lock(mu_);
    for (const MetricPoint& p : batch.points()) (*seen_)[p.name()] = p.value();
    acks_.push_back(batch.sequence_number());
    return true;
  }
  absl::StatusOr<int64_t> ReadAck() override {
    absl::MutexLock lock(mu_);
    mu_->Await(absl::Condition(
        +[](RecordingTransport* t) { return !t->acks_.empty() || t->closed_; },
        this));
    if (closed_) return absl::UnavailableError("closed");
    const int64_t ack = acks_.front();
    acks_.pop_front();
    return ack;
  }
  void Close() override {
    absl::MutexLock lock(mu_);
    closed_ = true;
  }

 private:
  std::map<std::string, double>* seen_;
  absl::Mutex* mu_;
  std::deque<int64_t> acks_;
  bool closed_ = false;
};

TEST(MetricTableTest, SeriesGoToTheEmitterAndNaNIsLeftOut) {
  absl::Mutex mu;
  std::map<std::string, double> seen;
  EmitterOptions options;
  options.source = "test";
  options.batch_interval = absl::Milliseconds(10);
  Emitter emitter(std::make_unique<RecordingTransport>(&seen, &mu), options);
  emitter.SetRun("run-1");
  EmitMetricTable(&emitter, 5, Table(), Figures{7, std::nan("")});
  ASSERT_OK(emitter.Flush(absl::Seconds(10)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(seen.size(), 1u);  // no lag (NaN), no series for the counter
  EXPECT_EQ(seen["demo/policy_version"], 7);
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
