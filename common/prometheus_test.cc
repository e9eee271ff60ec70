#include "common/prometheus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsRegistryTest, RendersFamiliesSortedWithHelpAndTypeOnce) {
  MetricsRegistry registry;
  registry.GetGauge("temperature", "Degrees.")->Set(21.5);
  registry.GetCounter("requests_total", "Requests.", {{"code", "200"}})
      ->Increment(3);
  registry.GetCounter("requests_total", "Ignored help.", {{"code", "500"}})
      ->Increment();
  EXPECT_EQ(registry.RenderText(),
            "# HELP requests_total Requests.\n"
            "# TYPE requests_total counter\n"
            "requests_total{code=\"200\"} 3\n"
            "requests_total{code=\"500\"} 1\n"
            "# HELP temperature Degrees.\n"
            "# TYPE temperature gauge\n"
            "temperature 21.5\n");
}

TEST(MetricsRegistryTest, EmptyRegistryRendersNothing) {
  MetricsRegistry registry;
  EXPECT_EQ(registry.RenderText(), "");
}

TEST(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  registry
      .GetGauge("g", "Back\\slash and\nnewline \"quotes\" stay.",
                {{"v", "a\\b \"q\"\nz {x=\"y\",}"}})
      ->Set(1);
  EXPECT_EQ(registry.RenderText(),
            "# HELP g Back\\\\slash and\\nnewline \"quotes\" stay.\n"
            "# TYPE g gauge\n"
            "g{v=\"a\\\\b \\\"q\\\"\\nz {x=\\\"y\\\",}\"} 1\n");
}

TEST(MetricsRegistryTest, SpecialAndExactValues) {
  MetricsRegistry registry;
  const double inf = std::numeric_limits<double>::infinity();
  registry.GetGauge("v", "", {{"k", "nan"}})
      ->Set(std::numeric_limits<double>::quiet_NaN());
  registry.GetGauge("v", "", {{"k", "pinf"}})->Set(inf);
  registry.GetGauge("v", "", {{"k", "ninf"}})->Set(-inf);
  registry.GetGauge("v", "", {{"k", "tenth"}})->Set(0.1);
  registry.GetGauge("v", "", {{"k", "neg"}})->Set(-3);
  registry.GetGauge("v", "", {{"k", "big"}})->Set(1e21);
  registry.GetGauge("v", "", {{"k", "third"}})->Set(1.0 / 3);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("v{k=\"nan\"} NaN\n"));
  EXPECT_THAT(text, HasSubstr("v{k=\"pinf\"} +Inf\n"));
  EXPECT_THAT(text, HasSubstr("v{k=\"ninf\"} -Inf\n"));
  EXPECT_THAT(text, HasSubstr("v{k=\"tenth\"} 0.1\n"));
  EXPECT_THAT(text, HasSubstr("v{k=\"neg\"} -3\n"));
  EXPECT_THAT(text, HasSubstr("v{k=\"big\"} 1e+21\n"));
  // Round-trips exactly.
  const size_t at = text.find("v{k=\"third\"} ");
  ASSERT_NE(at, std::string::npos);
  const size_t start = at + std::string("v{k=\"third\"} ").size();
  double parsed = 0;
  ASSERT_TRUE(absl::SimpleAtod(
      text.substr(start, text.find('\n', start) - start), &parsed));
  EXPECT_EQ(parsed, 1.0 / 3);
  EXPECT_THAT(text, HasSubstr("# HELP v \n"));
}

TEST(MetricsRegistryTest, SameNameAndLabelsIsSameObject) {
  MetricsRegistry registry;
  Counter* a = registry.GetCounter("c", "h", {{"x", "1"}, {"y", "2"}});
  EXPECT_EQ(registry.GetCounter("c", "h", {{"x", "1"}, {"y", "2"}}), a);
  // Label order does not matter.
  EXPECT_EQ(registry.GetCounter("c", "h", {{"y", "2"}, {"x", "1"}}), a);
  EXPECT_NE(registry.GetCounter("c", "h", {{"x", "1"}, {"y", "3"}}), a);
  EXPECT_NE(registry.GetCounter("c", "h"), a);
  Gauge* g = registry.GetGauge("g", "h");
  EXPECT_EQ(registry.GetGauge("g", "other help"), g);
  a->Increment(2);
  registry.GetCounter("c", "h", {{"y", "2"}, {"x", "1"}})->Increment(3);
  EXPECT_EQ(a->value(), 5);
  EXPECT_THAT(registry.RenderText(), HasSubstr("c{x=\"1\",y=\"2\"} 5\n"));
}

TEST(MetricsRegistryTest, FixesInvalidNames) {
  MetricsRegistry registry;
  Gauge* g = registry.GetGauge("9bad-name.x:y", "h", {{"la-bel:1", "v"}});
  g->Set(1);
  // The fixed name finds the same object.
  EXPECT_EQ(registry.GetGauge("_bad_name_x:y", "h", {{"la_bel_1", "v"}}), g);
  registry.GetGauge("", "h")->Set(2);
  registry.GetGauge("d", "h", {{"k", "first"}, {"k", "second"}})->Set(3);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("_bad_name_x:y{la_bel_1=\"v\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\n_ 2\n"));
  EXPECT_THAT(text, HasSubstr("d{k=\"first\"} 3\n"));
}

TEST(MetricsRegistryTest, TypeConflictIsNotExported) {
  MetricsRegistry registry;
  registry.GetCounter("x", "h")->Increment(1);
  Gauge* conflicting = registry.GetGauge("x", "h");
  ASSERT_NE(conflicting, nullptr);
  conflicting->Set(99);  // Usable, but never rendered.
  registry.AddCallback("x", "h", "gauge", [] {
    return MetricSamples{{{}, 77}};
  });
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("# TYPE x counter\nx 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("99")));
  EXPECT_THAT(text, Not(HasSubstr("77")));
}

TEST(MetricsRegistryTest, CounterIgnoresNegativeAndNan) {
  Counter counter;
  counter.Increment(2);
  counter.Increment(-1);
  counter.Increment(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(counter.value(), 2);
  Gauge gauge;
  gauge.Set(5);
  gauge.Add(-7.5);
  EXPECT_EQ(gauge.value(), -2.5);
}

TEST(MetricsRegistryTest, CallbacksRunAtEveryScrape) {
  MetricsRegistry registry;
  int depth = 3;
  registry.AddCallback("queue_depth", "Items waiting.", "gauge", [&] {
    return MetricSamples{{{{"queue", "b"}}, static_cast<double>(depth)},
                         {{{"queue", "a\"x"}}, 1}};
  });
  // A callback may use the registry (it runs without the lock held).
  registry.AddCallback("scrapes_total", "Scrapes.", "counter", [&registry] {
    Counter* scrapes = registry.GetCounter("inner_total", "Inner.");
    scrapes->Increment();
    return MetricSamples{{{}, scrapes->value()}};
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
                              "queue_depth{queue=\"b\"} 3\n"
                              "queue_depth{queue=\"a\\\"x\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("scrapes_total 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE odd untyped\nodd 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE throws gauge\n"));
  EXPECT_THAT(text, Not(HasSubstr("\nthrows ")));
  depth = 9;
  text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("queue_depth{queue=\"b\"} 9\n"));
  EXPECT_THAT(text, HasSubstr("scrapes_total 2\n"));
  // Registered during the first scrape, rendered from the second on.
  EXPECT_THAT(text, HasSubstr("inner_total 1\n"));
  // A second callback with the same name is dropped.
  registry.AddCallback("queue_depth", "Again.", "gauge", [] {
    return MetricSamples{{{}, 5}};
  });
  EXPECT_THAT(registry.RenderText(), HasSubstr("# HELP queue_depth Items"));
}

TEST(MetricsRegistryTest, ConcurrentUpdatesSumCorrectly) {
  MetricsRegistry registry;
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&registry, t] {
      // Each thread looks the objects up itself: lookups race too.
      Counter* counter = registry.GetCounter("hits_total", "Hits.");
      Gauge* gauge = registry.GetGauge("level", "Level.");
      Counter* own = registry.GetCounter("per_thread_total", "Per thread.",
                                         {{"t", std::to_string(t)}});
      for (int i = 0; i < kIncrements; ++i) {
        counter->Increment();
        gauge->Add(i % 2 == 0 ? 2 : -1);
        own->Increment(0.5);
      }
    });
  }
  // Scrapes run alongside the writers.
  for (int i = 0; i < 20; ++i) registry.RenderText();
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(registry.GetCounter("hits_total", "")->value(),
            kThreads * kIncrements);
  EXPECT_EQ(registry.GetGauge("level", "")->value(),
            kThreads * kIncrements / 2);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr(absl::StrCat("hits_total ",
                                           kThreads * kIncrements, "\n")));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("per_thread_total{t=\"", t, "\"} ",
                                             kIncrements / 2, "\n")));
  }
}

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

TEST(MetricsRegistryTest, DefaultRegistryHasProcessMetrics) {
  const std::string text = DefaultMetricsRegistry().RenderText();
  EXPECT_THAT(text, HasSubstr("# TYPE process_resident_memory_bytes gauge\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_start_time_seconds gauge\n"));
  EXPECT_GT(SampleValue(text, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(SampleValue(text, "process_virtual_memory_bytes"), 1 << 20);
  EXPECT_GE(SampleValue(text, "process_cpu_seconds_total"), 0);
  EXPECT_GT(SampleValue(text, "process_open_fds"), 2);
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  const double start = SampleValue(text, "process_start_time_seconds");
  // Clock ticks and the boot time's whole seconds make it coarse.
  EXPECT_GT(start, now - 3600);
  EXPECT_LT(start, now + 2);
  EXPECT_EQ(&DefaultMetricsRegistry(), &DefaultMetricsRegistry());
}

// A GET over a real socket; returns the raw response.
std::string HttpGet(int port, absl::string_view path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{15, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: t\r\n\r\n");
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, n);
  close(fd);
  return out;
}

TEST(MetricsServerTest, ServesMetricsAndExtraRoutes) {
  MetricsRegistry registry;
  registry.GetCounter("served_total", "Served.")->Increment(7);
  auto server = StartMetricsServer(
      "127.0.0.1", 0, &registry,
      {{"/",
        [](const HttpRequest&) {
          return HttpResponse{200, "text/html; charset=utf-8", "<p>hi</p>"};
        }},
       {"/metrics", [](const HttpRequest&) {
          return HttpResponse{200, "text/plain", "shadowed"};
        }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string metrics = HttpGet((*server)->port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(metrics, HasSubstr("Content-Type: text/plain; version=0.0.4; "
                                 "charset=utf-8\r\n"));
  EXPECT_THAT(metrics, HasSubstr("\r\n\r\n# HELP served_total Served.\n"
                                 "# TYPE served_total counter\n"
                                 "served_total 7\n"));
  EXPECT_THAT(HttpGet((*server)->port(), "/"), HasSubstr("<p>hi</p>"));
  EXPECT_THAT(HttpGet((*server)->port(), "/other"), HasSubstr("HTTP/1.1 404 "));
}

TEST(MetricsServerTest, NullRegistryIsInvalid) {
  EXPECT_EQ(StartMetricsServer("127.0.0.1", 0, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rl
