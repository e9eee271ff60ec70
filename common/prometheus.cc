#include "common/prometheus.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/logging.h"

namespace rl {
namespace {

// Adds `by` to `value` (std::atomic<double> has no fetch_add before C++20).
void AtomicAdd(std::atomic<double>* value, double by) {
  double current = value->load(std::memory_order_relaxed);
  while (!value->compare_exchange_weak(current, current + by,
                                       std::memory_order_relaxed)) {
  }
}

bool IsNameChar(char c, bool first, bool allow_colon) {
  if (absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_') {
    return true;
  }
  if (c == ':') return allow_colon;
  return !first && absl::ascii_isdigit(static_cast<unsigned char>(c));
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

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

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

// `{a="1",b="2"}` with names fixed, sorted and deduplicated (the first of a
// repeated name is kept); "" for no labels. Doubles as the series key.
std::string RenderLabels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::map<std::string, absl::string_view> sorted;
  for (const auto& [name, value] : labels) {
    sorted.emplace(SanitizeName(name, /*allow_colon=*/false), value);
  }
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : sorted) {
    absl::StrAppend(&out, first ? "" : ",", name, "=\"",
                    EscapeLabelValue(value), "\"");
    first = false;
  }
  out += "}";
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Whole numbers (counts, bytes) in plain digits: to_chars' shortest form
  // would write 800000 as "8e+05". Below 1e15 every integer is exact.
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  char buf[32];
  const std::to_chars_result result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
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

void Counter::Increment(double by) {
  if (!(by >= 0)) return;
  AtomicAdd(&value_, by);
}

double Counter::value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::Set(double v) { value_.store(v, std::memory_order_relaxed); }

void Gauge::Add(double by) { AtomicAdd(&value_, by); }

double Gauge::value() const { return value_.load(std::memory_order_relaxed); }

MetricsRegistry::Family* MetricsRegistry::FindOrAddFamily(
    const std::string& name, const std::string& help, Type type) {
  if (callbacks_.count(name) != 0) {
    RL_LOG_ERROR("metrics: {} is already a callback family", name);
    return nullptr;
  }
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_.emplace(name, Family{type, help, {}, {}}).first;
  }
  if (it->second.type != type) {
    RL_LOG_ERROR("metrics: {} is already registered with another type", name);
    return nullptr;
  }
  return &it->second;
}

Counter* MetricsRegistry::GetCounter(const std::string& name,
                                     const std::string& help,
                                     const MetricLabels& labels) {
  const std::string fixed = SanitizeMetricName(name);
  const std::string key = RenderLabels(labels);
  absl::MutexLock lock(&mu_);
  Family* family = FindOrAddFamily(fixed, help, Type::kCounter);
  if (family == nullptr) {
    orphan_counters_.push_back(std::make_unique<Counter>());
    return orphan_counters_.back().get();
  }
  std::unique_ptr<Counter>& counter = family->counters[key];
  if (counter == nullptr) counter = std::make_unique<Counter>();
  return counter.get();
}

Gauge* MetricsRegistry::GetGauge(const std::string& name,
                                 const std::string& help,
                                 const MetricLabels& labels) {
  const std::string fixed = SanitizeMetricName(name);
  const std::string key = RenderLabels(labels);
  absl::MutexLock lock(&mu_);
  Family* family = FindOrAddFamily(fixed, help, Type::kGauge);
  if (family == nullptr) {
    orphan_gauges_.push_back(std::make_unique<Gauge>());
    return orphan_gauges_.back().get();
  }
  std::unique_ptr<Gauge>& gauge = family->gauges[key];
  if (gauge == nullptr) gauge = std::make_unique<Gauge>();
  return gauge.get();
}

void MetricsRegistry::AddCallback(const std::string& name,
                                  const std::string& help,
                                  const std::string& type,
                                  std::function<MetricSamples()> fn) {
  const std::string fixed = SanitizeMetricName(name);
  absl::MutexLock lock(&mu_);
  if (families_.count(fixed) != 0 || callbacks_.count(fixed) != 0) {
    RL_LOG_ERROR("metrics: {} is already registered; callback dropped", fixed);
    return;
  }
  CallbackFamily family;
  family.help = help;
  family.type = (type == "gauge" || type == "counter") ? type : "untyped";
  family.fn =
      std::make_shared<const std::function<MetricSamples()>>(std::move(fn));
  callbacks_.emplace(fixed, std::move(family));
}

std::string MetricsRegistry::RenderText() const {
  struct Rendered {
    std::string help;
    std::string type;
    // (rendered labels, value)
    std::vector<std::pair<std::string, double>> samples;
  };
  std::map<std::string, Rendered> out;
  std::vector<std::pair<std::string, CallbackFamily>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, family] : families_) {
      Rendered& rendered = out[name];
      rendered.help = family.help;
      if (family.type == Type::kCounter) {
        rendered.type = "counter";
        for (const auto& [labels, counter] : family.counters) {
          rendered.samples.emplace_back(labels, counter->value());
        }
      } else {
        rendered.type = "gauge";
        for (const auto& [labels, gauge] : family.gauges) {
          rendered.samples.emplace_back(labels, gauge->value());
        }
      }
    }
    callbacks.assign(callbacks_.begin(), callbacks_.end());
  }
  // Callbacks run unlocked: they may be slow or use this registry.
  for (const auto& [name, family] : callbacks) {
    Rendered& rendered = out[name];
    rendered.help = family.help;
    rendered.type = family.type;
    MetricSamples samples;
    try {
      samples = (*family.fn)();
    } catch (const std::exception& e) {
      RL_LOG_ERROR("metrics: callback for {} threw: {}", name, e.what());
    } catch (...) {
      RL_LOG_ERROR("metrics: callback for {} threw", name);
    }
    for (const auto& [labels, value] : samples) {
      rendered.samples.emplace_back(RenderLabels(labels), value);
    }
  }

  std::string text;
  for (const auto& [name, family] : out) {
    absl::StrAppend(&text, "# HELP ", name, " ", EscapeHelp(family.help), "\n",
                    "# TYPE ", name, " ", family.type, "\n");
    for (const auto& [labels, value] : family.samples) {
      absl::StrAppend(&text, name, labels, " ", FormatValue(value), "\n");
    }
  }
  return text;
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

MetricsRegistry& DefaultMetricsRegistry() {
  static MetricsRegistry* const registry = [] {
    auto* r = new MetricsRegistry();
    RegisterProcessMetrics(r);
    return r;
  }();
  return *registry;
}

absl::StatusOr<std::unique_ptr<HttpServer>> StartMetricsServer(
    const std::string& host, int port, MetricsRegistry* registry,
    std::map<std::string, HttpHandler> extra_routes) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("metrics server: no registry");
  }
  std::map<std::string, HttpHandler> routes = std::move(extra_routes);
  routes["/metrics"] = [registry](const HttpRequest&) {
    HttpResponse response;
    response.content_type = kPrometheusContentType;
    response.body = registry->RenderText();
    return response;
  };
  return HttpServer::Start(host, port, std::move(routes));
}

}  // namespace rl
