#include "telemetry/client/metrics_registry.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "prometheus/client_metric.h"
#include "prometheus/family.h"
#include "prometheus/labels.h"
#include "prometheus/text_serializer.h"

namespace rl {
namespace {

bool IsNameChar(char c, bool first, bool allow_colon) {
  const auto u = static_cast<unsigned char>(c);
  if (absl::ascii_isalpha(u) || c == '_') return true;
  if (c == ':') return allow_colon;
  return !first && absl::ascii_isdigit(u);
}

// Replaces every character not allowed at its position with '_'.
std::string SanitizeName(absl::string_view name, bool allow_colon) {
  if (name.empty()) return "_";
  std::string out(name);
  for (size_t i = 0; i < out.size(); ++i) {
    if (!IsNameChar(out[i], i == 0, allow_colon)) out[i] = '_';
  }
  return out;
}

std::string SanitizeMetricName(absl::string_view name) {
  return SanitizeName(name, /*allow_colon=*/true);
}

// Names fixed; of a repeated name the first is kept.
prometheus::Labels ToLabels(const MetricLabels& labels) {
  prometheus::Labels out;
  for (const auto& [name, value] : labels) {
    out.emplace(SanitizeName(name, /*allow_colon=*/false), value);
  }
  return out;
}

// prometheus-cpp 1.0.1 writes HELP text as it is; the format wants '\' and
// newlines escaped, or a parser reads the rest of the help as a sample.
std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool ReadFile(const char* path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in),
              std::istreambuf_iterator<char>());
  return true;
}

// The fields of /proc/self/stat after the command name, so that index 0 is
// field 3 ("state") of proc(5). Empty if unreadable.
std::vector<std::string> ProcSelfStatFields() {
  std::string stat;
  if (!ReadFile("/proc/self/stat", &stat)) return {};
  // The command name is in parentheses and may hold spaces and ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return {};
  return absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ',
                        absl::SkipWhitespace());
}

// proc(5) field `n` (1-based, as in the manual) of /proc/self/stat.
bool StatField(const std::vector<std::string>& fields, int n, double* out) {
  const size_t index = static_cast<size_t>(n - 3);
  return index < fields.size() && absl::SimpleAtod(fields[index], out);
}

MetricSamples OneSample(bool ok, double value) {
  if (!ok) return {};
  return {{MetricLabels{}, value}};
}

double BootTimeSeconds() {
  std::string stat;
  if (!ReadFile("/proc/stat", &stat)) return 0;
  for (absl::string_view line : absl::StrSplit(stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      double btime = 0;
      if (absl::SimpleAtod(line, &btime)) return btime;
    }
  }
  return 0;
}

}  // namespace

MetricsRegistry::MetricsRegistry(bool process_metrics)
    : registry_(std::make_shared<prometheus::Registry>()) {
  if (process_metrics) RegisterProcessMetrics(this);
}

MetricsRegistry::~MetricsRegistry() = default;

bool MetricsRegistry::Claim(const std::string& name, Kind kind) {
  const auto [it, inserted] = kinds_.emplace(name, kind);
  if (inserted || (it->second == kind && kind != Kind::kCallback)) return true;
  RL_LOG_ERROR("metrics: {} is already registered; not exported again", name);
  return false;
}

prometheus::Counter* MetricsRegistry::GetCounter(const std::string& name,
                                                 const std::string& help,
                                                 const MetricLabels& labels) {
  const std::string fixed = SanitizeMetricName(name);
  absl::MutexLock lock(&mu_);
  if (Claim(fixed, Kind::kCounter)) {
    try {
      return &prometheus::BuildCounter()
                  .Name(fixed)
                  .Help(EscapeHelp(help))
                  .Register(*registry_)
                  .Add(ToLabels(labels));
    } catch (const std::exception& e) {
      RL_LOG_ERROR("metrics: counter {} refused: {}", fixed, e.what());
    }
  }
  orphan_counters_.push_back(std::make_unique<prometheus::Counter>());
  return orphan_counters_.back().get();
}

prometheus::Gauge* MetricsRegistry::GetGauge(const std::string& name,
                                             const std::string& help,
                                             const MetricLabels& labels) {
  const std::string fixed = SanitizeMetricName(name);
  absl::MutexLock lock(&mu_);
  if (Claim(fixed, Kind::kGauge)) {
    try {
      return &prometheus::BuildGauge()
                  .Name(fixed)
                  .Help(EscapeHelp(help))
                  .Register(*registry_)
                  .Add(ToLabels(labels));
    } catch (const std::exception& e) {
      RL_LOG_ERROR("metrics: gauge {} refused: {}", fixed, e.what());
    }
  }
  orphan_gauges_.push_back(std::make_unique<prometheus::Gauge>());
  return orphan_gauges_.back().get();
}

void MetricsRegistry::AddCallback(const std::string& name,
                                  const std::string& help,
                                  const std::string& type,
                                  std::function<MetricSamples()> fn) {
  const std::string fixed = SanitizeMetricName(name);
  absl::MutexLock lock(&mu_);
  if (!Claim(fixed, Kind::kCallback)) return;
  Callback callback;
  callback.help = EscapeHelp(help);
  callback.type = type == "counter" ? prometheus::MetricType::Counter
                  : type == "gauge" ? prometheus::MetricType::Gauge
                                    : prometheus::MetricType::Untyped;
  callback.fn =
      std::make_shared<const std::function<MetricSamples()>>(std::move(fn));
  callbacks_.emplace(fixed, std::move(callback));
}

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::map<std::string, Callback> callbacks;
  {
    absl::MutexLock lock(&mu_);
    callbacks = callbacks_;
  }
  // Callbacks run unlocked: they may be slow or use this registry.
  for (const auto& [name, callback] : callbacks) {
    prometheus::MetricFamily family;
    family.name = name;
    family.help = callback.help;
    family.type = callback.type;
    MetricSamples samples;
    try {
      samples = (*callback.fn)();
    } catch (const std::exception& e) {
      RL_LOG_ERROR("metrics: callback for {} threw: {}", name, e.what());
    } catch (...) {
      RL_LOG_ERROR("metrics: callback for {} threw", name);
    }
    for (const auto& [labels, value] : samples) {
      prometheus::ClientMetric metric;
      for (const auto& [label, label_value] : ToLabels(labels)) {
        metric.label.push_back({label, label_value});
      }
      switch (callback.type) {
        case prometheus::MetricType::Counter:
          metric.counter.value = value;
          break;
        case prometheus::MetricType::Gauge:
          metric.gauge.value = value;
          break;
        default:
          metric.untyped.value = value;
      }
      family.metric.push_back(std::move(metric));
    }
    families.push_back(std::move(family));
  }
  std::sort(families.begin(), families.end(),
            [](const prometheus::MetricFamily& a,
               const prometheus::MetricFamily& b) { return a.name < b.name; });
  return families;
}

std::string MetricsRegistry::RenderText() const {
  return prometheus::TextSerializer().Serialize(Collect());
}

void RegisterProcessMetrics(MetricsRegistry* registry) {
  const double page_size = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  registry->AddCallback("process_resident_memory_bytes",
                        "Resident memory size in bytes.", "gauge", [page_size] {
                          double rss_pages = 0;
                          const bool ok =
                              StatField(ProcSelfStatFields(), 24, &rss_pages);
                          return OneSample(ok, rss_pages * page_size);
                        });
  registry->AddCallback("process_virtual_memory_bytes",
                        "Virtual memory size in bytes.", "gauge", [] {
                          double vsize = 0;
                          const bool ok =
                              StatField(ProcSelfStatFields(), 23, &vsize);
                          return OneSample(ok, vsize);
                        });
  registry->AddCallback(
      "process_cpu_seconds_total",
      "Total user and system CPU time spent in seconds.", "counter",
      [ticks_per_second] {
        const std::vector<std::string> fields = ProcSelfStatFields();
        double utime = 0, stime = 0;
        const bool ok =
            StatField(fields, 14, &utime) && StatField(fields, 15, &stime);
        return OneSample(ok, (utime + stime) / ticks_per_second);
      });
  // Fixed for the life of the process: computed once.
  double start_ticks = 0;
  const bool start_ok = StatField(ProcSelfStatFields(), 22, &start_ticks);
  const double boot_time = BootTimeSeconds();
  const double start_time = boot_time + start_ticks / ticks_per_second;
  registry->AddCallback(
      "process_start_time_seconds",
      "Start time of the process since unix epoch in seconds.", "gauge",
      [ok = start_ok && boot_time > 0, start_time] {
        return OneSample(ok, start_time);
      });
  registry->AddCallback(
      "process_open_fds", "Number of open file descriptors.", "gauge", [] {
        std::error_code ec;
        double count = 0;
        for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end;
             !ec && it != end; it.increment(ec)) {
          ++count;
        }
        return OneSample(!ec, count);
      });
}

}  // namespace rl
