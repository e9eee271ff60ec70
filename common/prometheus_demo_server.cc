// A metrics server with awkward series (escaped label values, NaN, +Inf,
// -Inf, a callback family, a fixed-up name), for prometheus_format_test.py
// to scrape. Serves until SIGTERM or SIGINT.
//
//   prometheus_demo_server --port=0 --port_file=/tmp/port
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/prometheus.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 0, "Port; 0 picks a free one.");
ABSL_FLAG(std::string, port_file, "", "Write the bound port here.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Blocked before any thread starts, so every thread inherits the mask and
  // sigwait below is the one place the signals arrive.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  rl::MetricsRegistry& registry = rl::DefaultMetricsRegistry();
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
  registry.GetGauge("demo-bad.name", "Help with a \\ and a\nsecond line.")
      ->Set(42);
  registry.AddCallback("demo_queue_depth", "Items waiting, per queue.", "gauge",
                       [] {
                         return rl::MetricSamples{
                             {{{"queue", "learner"}}, 7},
                             {{{"queue", "actor"}}, 0},
                         };
                       });

  auto server = rl::StartMetricsServer(
      absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_port), &registry,
      {{"/healthz", [](const rl::HttpRequest&) {
          return rl::HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
        }}});
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("metrics on %s:%d\n", absl::GetFlag(FLAGS_host).c_str(),
              (*server)->port());
  std::fflush(stdout);
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    const std::string tmp = absl::GetFlag(FLAGS_port_file) + ".tmp";
    std::ofstream(tmp) << (*server)->port() << "\n";
    std::rename(tmp.c_str(), absl::GetFlag(FLAGS_port_file).c_str());
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  (*server)->Stop();
  return 0;
}
