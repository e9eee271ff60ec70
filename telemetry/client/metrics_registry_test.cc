#include "telemetry/client/metrics_registry.h"

#include <ctime>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The value of the unlabelled sample `name` in `text`, or -1.
double SampleValue(absl::string_view text, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, name) && absl::ConsumePrefix(&line, " ")) {
      double value = 0;
      if (absl::SimpleAtod(line, &value)) return value;
    }
  }
  return -1;
}

TEST(MetricsRegistryTest, FamiliesSortedByNameWithHelpAndTypeOnce) {
  MetricsRegistry registry(/*process_metrics=*/false);
  registry.GetGauge("b_gauge", "A gauge.")->Set(2.5);
  registry.GetCounter("a_total", "A counter.", {{"k", "x"}})->Increment(3);
  registry.AddCallback("ab_depth", "A callback.", "gauge", [] {
    return MetricSamples{{{}, 7}};
  });
  EXPECT_EQ(registry.RenderText(),
            "# HELP a_total A counter.\n"
            "# TYPE a_total counter\n"
            "a_total{k=\"x\"} 3\n"
            "# HELP ab_depth A callback.\n"
            "# TYPE ab_depth gauge\n"
            "ab_depth 7\n"
            "# HELP b_gauge A gauge.\n"
            "# TYPE b_gauge gauge\n"
            "b_gauge 2.5\n");
}

TEST(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry(/*process_metrics=*/false);
  registry
      .GetCounter("c_total", "Back\\slash and\nnewline.", {{"v", "q\"b\\n\nl"}})
      ->Increment();
  EXPECT_EQ(registry.RenderText(),
            "# HELP c_total Back\\\\slash and\\nnewline.\n"
            "# TYPE c_total counter\n"
            "c_total{v=\"q\\\"b\\\\n\\nl\"} 1\n");
}

TEST(MetricsRegistryTest, SameNameAndLabelsIsSameObject) {
  MetricsRegistry registry(/*process_metrics=*/false);
  prometheus::Counter* a = registry.GetCounter("c", "h", {{"x", "1"}});
  EXPECT_EQ(registry.GetCounter("c", "other help", {{"x", "1"}}), a);
  EXPECT_NE(registry.GetCounter("c", "h", {{"x", "2"}}), a);
  prometheus::Gauge* g = registry.GetGauge("g", "h", {{"x", "1"}, {"y", "2"}});
  EXPECT_EQ(registry.GetGauge("g", "h", {{"y", "2"}, {"x", "1"}}), g);
  a->Increment(5);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("# HELP c h\n"));
  EXPECT_THAT(text, HasSubstr("c{x=\"1\"} 5\n"));
}

TEST(MetricsRegistryTest, FixesInvalidNames) {
  MetricsRegistry registry(/*process_metrics=*/false);
  prometheus::Gauge* g =
      registry.GetGauge("9bad-name.x:y", "h", {{"la-bel.1", "v"}});
  g->Set(1);
  EXPECT_EQ(registry.GetGauge("_bad_name_x:y", "h", {{"la_bel_1", "v"}}), g);
  registry.GetGauge("", "empty name")->Set(2);
  // Of a repeated label name the first is kept.
  registry.GetGauge("d", "h", {{"k", "first"}, {"k", "second"}})->Set(3);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("_bad_name_x:y{la_bel_1=\"v\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\n_ 2\n"));
  EXPECT_THAT(text, HasSubstr("d{k=\"first\"} 3\n"));
}

TEST(MetricsRegistryTest, RefusedNamesWorkButAreNotExported) {
  MetricsRegistry registry(/*process_metrics=*/false);
  registry.GetCounter("x", "h")->Increment();
  prometheus::Gauge* conflicting = registry.GetGauge("x", "h");
  ASSERT_NE(conflicting, nullptr);
  conflicting->Set(99);
  EXPECT_EQ(conflicting->Value(), 99);
  registry.AddCallback("x", "h", "gauge", [] {
    return MetricSamples{{{}, 77}};
  });
  // prometheus-cpp refuses names with the reserved "__" prefix.
  prometheus::Counter* reserved = registry.GetCounter("__reserved", "h");
  reserved->Increment(55);
  registry.AddCallback("cb", "h", "gauge", [] {
    return MetricSamples{{{}, 1}};
  });
  registry.GetCounter("cb", "h")->Increment(66);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("# TYPE x counter\nx 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE cb gauge\ncb 1\n"));
  for (const char* hidden : {"99", "77", "55", "66", "__reserved"}) {
    EXPECT_THAT(text, Not(HasSubstr(hidden)));
  }
}

TEST(MetricsRegistryTest, CallbacksRunAtEveryScrape) {
  MetricsRegistry registry(/*process_metrics=*/false);
  int depth = 3;
  registry.AddCallback("queue_depth", "Items waiting.", "gauge", [&] {
    return MetricSamples{{{{"queue", "b"}}, static_cast<double>(depth)}};
  });
  // A callback may use the registry (it runs without the lock held).
  registry.AddCallback("scrapes_total", "Scrapes.", "counter", [&registry] {
    prometheus::Counter* scrapes = registry.GetCounter("inner_total", "Inner.");
    scrapes->Increment();
    return MetricSamples{{{}, scrapes->Value()}};
  });
  registry.AddCallback("odd", "Unknown type.", "histogram", [] {
    return MetricSamples{{{}, 1}};
  });
  registry.AddCallback("throws", "Throws.", "gauge", []() -> MetricSamples {
    throw std::runtime_error("x");
  });
  std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("# HELP queue_depth Items waiting.\n"
                              "# TYPE queue_depth gauge\n"
                              "queue_depth{queue=\"b\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("scrapes_total 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE odd untyped\nodd 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("\nthrows ")));
  depth = 9;
  text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("queue_depth{queue=\"b\"} 9\n"));
  EXPECT_THAT(text, HasSubstr("scrapes_total 2\n"));
  // Registered during the first scrape, exported from the second on.
  EXPECT_THAT(text, HasSubstr("inner_total 1\n"));
  // A second callback with the same name is dropped.
  registry.AddCallback("queue_depth", "Again.", "gauge", [] {
    return MetricSamples{{{}, 5}};
  });
  EXPECT_THAT(registry.RenderText(), HasSubstr("# HELP queue_depth Items"));
}

TEST(MetricsRegistryTest, ConcurrentUpdatesAndScrapes) {
  MetricsRegistry registry(/*process_metrics=*/false);
  constexpr int kThreads = 4;
  constexpr int kIncrements = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&registry, t] {
      // Each thread looks the objects up itself: lookups race too.
      prometheus::Counter* counter = registry.GetCounter("hits_total", "Hits.");
      prometheus::Counter* own = registry.GetCounter(
          "per_thread_total", "Per thread.", {{"t", std::to_string(t)}});
      for (int i = 0; i < kIncrements; ++i) {
        counter->Increment();
        own->Increment(0.5);
      }
    });
  }
  for (int i = 0; i < 20; ++i) registry.RenderText();
  for (std::thread& thread : threads) thread.join();
  const std::string text = registry.RenderText();
  EXPECT_EQ(SampleValue(text, "hits_total"), kThreads * kIncrements);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("per_thread_total{t=\"", t, "\"} ",
                                             kIncrements / 2, "\n")));
  }
}

TEST(MetricsRegistryTest, ProcessMetrics) {
  MetricsRegistry registry;
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("# TYPE process_resident_memory_bytes gauge\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"));
  EXPECT_GT(SampleValue(text, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(SampleValue(text, "process_virtual_memory_bytes"), 1 << 20);
  EXPECT_GE(SampleValue(text, "process_cpu_seconds_total"), 0);
  EXPECT_GT(SampleValue(text, "process_open_fds"), 2);
  const double start = SampleValue(text, "process_start_time_seconds");
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_GT(start, now - 3600);
  EXPECT_LT(start, now + 2);

  MetricsRegistry without(/*process_metrics=*/false);
  EXPECT_EQ(without.RenderText(), "");
}

}  // namespace
}  // namespace rl
