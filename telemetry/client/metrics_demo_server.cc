// An HTTP endpoint with awkward metrics (escaped label values and help, NaN,
// +Inf, -Inf, a callback family, a fixed-up name) and the process metrics,
// for prometheus_format_test.py to scrape. Serves until SIGTERM or SIGINT.
//
//   metrics_demo_server --port=0 --port_file=/tmp/port
#include <cstdio>
#include <limits>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/port_file.h"
#include "common/signal_waiter.h"
#include "telemetry/client/http_endpoint.h"
#include "telemetry/client/metrics_registry.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 0, "Port; 0 picks a free one.");
ABSL_FLAG(std::string, port_file, "", "Write the bound port here.");

int main(int argc, char** argv) {
  rl::BlockStopSignals();
  absl::ParseCommandLine(argc, argv);

  rl::MetricsRegistry registry;
  const std::string help = "Requests by path.";
  registry.GetCounter("demo_requests_total", help, {{"path", "/plain"}})
      ->Increment(3);
  registry.GetCounter("demo_requests_total", help, {{"path", "back\\slash"}})
      ->Increment(1.5);
  registry.GetCounter("demo_requests_total", help, {{"path", "say \"hi\""}})
      ->Increment(2);
  registry.GetCounter("demo_requests_total", help, {{"path", "two\nlines"}})
      ->Increment(4);
  registry
      .GetCounter("demo_requests_total", help,
                  {{"path", "caf\xc3\xa9 {a=\"b\",c} \\\""}})
      ->Increment(5);
  const double inf = std::numeric_limits<double>::infinity();
  registry.GetGauge("demo_value", "Odd values.", {{"kind", "nan"}})
      ->Set(std::numeric_limits<double>::quiet_NaN());
  registry.GetGauge("demo_value", "Odd values.", {{"kind", "pos_inf"}})
      ->Set(inf);
  registry.GetGauge("demo_value", "Odd values.", {{"kind", "neg_inf"}})
      ->Set(-inf);
  registry.GetGauge("demo_value", "Odd values.", {{"kind", "small"}})
      ->Set(1.25e-7);
  registry.GetGauge("demo_value", "Odd values.", {{"kind", "big"}})->Set(-2e21);
  registry.GetGauge("demo_value", "Odd values.", {{"kind", "third"}})
      ->Set(1.0 / 3);
  registry.GetGauge("demo-bad.name", "Help with a \\ and a\nsecond line.")
      ->Set(42);
  registry.AddCallback("demo_queue_depth", "Items waiting, per queue.", "gauge",
                       [] {
                         return rl::MetricSamples{
                             {{{"queue", "learner"}}, 7},
                             {{{"queue", "actor"}}, 0},
                         };
                       });

  auto endpoint = rl::HttpEndpoint::Start(
      absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_port), &registry,
      [](httplib::Server* server) {
        server->Get("/healthz",
                    [](const httplib::Request&, httplib::Response& response) {
                      response.set_content("ok\n", "text/plain; charset=utf-8");
                    });
      });
  if (!endpoint.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(endpoint.status().message()).c_str());
    return 1;
  }
  std::printf("metrics on %s:%d\n", absl::GetFlag(FLAGS_host).c_str(),
              (*endpoint)->port());
  std::fflush(stdout);
  if (absl::Status s = rl::WritePortFile(absl::GetFlag(FLAGS_port_file),
                                         (*endpoint)->port());
      !s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  while (rl::WaitForStopSignal(absl::InfiniteDuration()) == 0) {
  }
  (*endpoint)->Stop();
  return 0;
}
