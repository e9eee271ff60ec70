// What a hostile client can make each real server hold (issue 15): every
// server binary runs as a child process on loopback; the client opens
// hundreds of streams it never reads from (or sends nothing on), fills what
// the server stores, then leaves. The server process's RSS, peak RSS, open
// file descriptors and threads (from /proc/PID) are printed idle, under load
// and after the clients left, each beside its ratio to idle, with what the
// server refused, by status code. The load is applied --rounds times: what
// the allocator keeps after round 1 stays level after round 2, a leak grows.
//
//   telemetry:   Watch streams never read (beyond max_watchers refused), a
//                watched run fed past max_watch_backlog_bytes, points into
//                --telemetry_runs distinct runs (one TensorBoard event file
//                each, at most max_open_event_files open).
//   coordinator: no workers, so submitted runs stay queued; a WatchRun
//                stream per run, abandoned (cancelled), then the runs
//                cancelled.
//   learner:     standalone on examples/cartpole.yaml with no actors;
//                SubscribePolicy streams never read, StreamRollouts streams
//                that send nothing; then hung up.
//
// Streams are callback-API reactors (gRPC's threads, no thread per stream),
// spread over --connections TCP connections. Every wait has a deadline and
// --deadline_s bounds the whole run; the servers die with the bench. Exits
// non-zero only when a server could not be started (or died): refusals and
// figures are printed, never judged.
//
//   bazel run --config=opt //bench:bounds_bench
//
// (or bazel-bin/bench/bounds_bench: the server binaries and a relative
// --learner_run are found as bench/bench_files.h says)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_files.h"
#include "common/grpc_util.h"
#include "common/subprocess.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/learner.grpc.pb.h"
#include "proto/telemetry.grpc.pb.h"

ABSL_FLAG(std::string, servers, "telemetry,coordinator,learner",
          "Servers to measure, comma-separated.");
ABSL_FLAG(int, connections, 8,
          "TCP connections the hostile client spreads its streams over.");
ABSL_FLAG(int, telemetry_watchers, 300, "Watch streams opened, never read.");
ABSL_FLAG(int, telemetry_runs, 1000, "Distinct runs points are ingested into.");
ABSL_FLAG(int, watch_flood_points, 100000,
          "Points into the watched run (past max_watch_backlog_bytes).");
ABSL_FLAG(int, coordinator_runs, 300,
          "Runs submitted (and watched, then cancelled).");
ABSL_FLAG(int, policy_subscribers, 200,
          "SubscribePolicy streams opened, never read.");
ABSL_FLAG(int, rollout_streams, 100,
          "StreamRollouts streams opened, nothing sent.");
ABSL_FLAG(std::string, learner_run, "examples/cartpole.yaml",
          "Run file of the standalone learner.");
ABSL_FLAG(int, rounds, 2,
          "Times the load is applied and the client leaves: memory kept by "
          "the allocator stays level from round 2, a leak grows.");
ABSL_FLAG(double, deadline_s, 900, "The whole bench ends within this.");

namespace rl {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// The server process, seen from /proc.

struct ProcessSample {
  double rss_mib = 0;   // VmRSS
  double peak_mib = 0;  // VmHWM: the highest RSS so far
  int fds = 0;
  int threads = 0;
};

std::optional<ProcessSample> SampleProcess(pid_t pid) {
  const std::string proc = absl::StrCat("/proc/", pid);
  std::ifstream status(proc + "/status");
  if (!status) return std::nullopt;
  ProcessSample sample;
  std::string line;
  while (std::getline(status, line)) {
    std::vector<std::string> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.size() < 2) continue;
    double value = 0;
    if (!absl::SimpleAtod(words[1], &value)) continue;
    if (words[0] == "VmRSS:") sample.rss_mib = value / 1024;
    if (words[0] == "VmHWM:") sample.peak_mib = value / 1024;
    if (words[0] == "Threads:") sample.threads = static_cast<int>(value);
  }
  std::error_code ec;
  for (fs::directory_iterator it(proc + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++sample.fds;
  }
  if (ec) return std::nullopt;
  return sample;
}

// Samples every 100 ms until FDs and threads have not changed for `quiet`
// (or `timeout` passed); the last sample, and how long that took.
std::optional<ProcessSample> SettledSample(pid_t pid, absl::Duration quiet,
                                           absl::Duration timeout,
                                           absl::Duration* took = nullptr) {
  const absl::Time start = absl::Now();
  std::optional<ProcessSample> last = SampleProcess(pid);
  absl::Time last_change = start;
  while (last.has_value() && absl::Now() - last_change < quiet &&
         absl::Now() - start < timeout) {
    absl::SleepFor(absl::Milliseconds(100));
    std::optional<ProcessSample> now = SampleProcess(pid);
    if (!now.has_value()) return std::nullopt;
    if (now->fds != last->fds || now->threads != last->threads) {
      last_change = absl::Now();
    }
    last = now;
  }
  if (took != nullptr) *took = last_change - start;
  return last;
}

// The child started with `arg` on its command line (a unique port file).
std::optional<pid_t> FindChild(const std::string& arg) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
    for (absl::string_view a : absl::StrSplit(cmdline, '\0')) {
      if (a == arg) return pid;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// A server binary as a child process.

class ServerProcess {
 public:
  // Starts `binary` (runfiles-relative) with `args` plus
  // --port=0 --port_file=...; waits for its port.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& name, const std::string& binary,
      std::vector<std::string> args, const std::string& dir) {
    const std::string port_file = dir + "/" + name + ".port";
    std::vector<std::string> argv = {BenchFilePath(binary), "--port=0",
                                     "--port_file=" + port_file};
    argv.insert(argv.end(), args.begin(), args.end());
    auto process = std::unique_ptr<ServerProcess>(new ServerProcess(name));
    process->subprocess_ = std::make_unique<Subprocess>(
        argv, dir + "/" + name + ".log", /*die_with_parent=*/true);
    std::optional<std::string> port =
        WaitForFile(port_file, absl::Seconds(120));
    int port_number = 0;
    if (!port.has_value() ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(*port), &port_number)) {
      return absl::UnavailableError(
          absl::StrCat(name, ": no port in ", port_file,
                       " within 120 s; log:\n", process->subprocess_->Log()));
    }
    std::optional<pid_t> pid = FindChild("--port_file=" + port_file);
    if (!pid.has_value()) {
      return absl::UnavailableError(absl::StrCat(name, ": no process found"));
    }
    process->port_ = port_number;
    process->pid_ = *pid;
    return process;
  }

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  bool running() { return subprocess_->running(); }
  std::string Log() const { return subprocess_->Log(); }

  // SIGTERM, then SIGKILL after 30 s; a line with the exit code and time.
  std::string Stop() {
    const absl::Time start = absl::Now();
    subprocess_->Signal(SIGTERM);
    std::optional<int> code = subprocess_->Wait(absl::Seconds(30));
    if (code.has_value()) {
      return absl::StrFormat("stopped by SIGTERM in %.2f s, exit code %d",
                             absl::ToDoubleSeconds(absl::Now() - start), *code);
    }
    subprocess_->Signal(SIGKILL);
    subprocess_->Wait(absl::Seconds(10));
    return "still running 30 s after SIGTERM: killed";
  }

 private:
  explicit ServerProcess(std::string name) : name_(std::move(name)) {}

  std::string name_;
  std::unique_ptr<Subprocess> subprocess_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// ---------------------------------------------------------------------------
// The hostile client's streams.

const char* CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i <= 16 ? kNames[i] : "?";
}

using CodeCounts = std::map<grpc::StatusCode, int>;

std::string FormatCodes(const CodeCounts& counts) {
  if (counts.empty()) return "none";
  std::vector<std::string> parts;
  for (const auto& [code, n] : counts) {
    parts.push_back(absl::StrCat(n, " ", CodeName(code)));
  }
  return absl::StrJoin(parts, ", ");
}

// How the streams of one kind ended, by status code; OnDone reports here.
class StreamTally {
 public:
  void Started() {
    absl::MutexLock lock(&mu_);
    ++started_;
    last_change_ = absl::Now();
  }
  void Finished(grpc::StatusCode code) {
    absl::MutexLock lock(&mu_);
    ++finished_[code];
    ++done_;
    last_change_ = absl::Now();
  }
  CodeCounts finished() const {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  int open() const {
    absl::MutexLock lock(&mu_);
    return started_ - done_;
  }
  // Until no stream has started or ended for `quiet` (the server has
  // answered what it refuses), at most `timeout`.
  void WaitQuiet(absl::Duration quiet, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (absl::Now() < deadline && absl::Now() - last_change_ < quiet) {
      mu_.AwaitWithTimeout(absl::Condition::kTrue, absl::Milliseconds(50));
    }
  }
  bool WaitAllDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return done_ == started_;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&all), timeout);
  }

 private:
  mutable absl::Mutex mu_;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  CodeCounts finished_ ABSL_GUARDED_BY(mu_);
  absl::Time last_change_ ABSL_GUARDED_BY(mu_) = absl::Now();
};

// A stream the client holds and never reads from or writes to. States:
// started -> (the server ends it: OnDone with its code) or (Cancel: OnDone
// with CANCELLED). The owner keeps it until its tally has every OnDone.
class HeldStream {
 public:
  virtual ~HeldStream() = default;
  void Cancel() { context_.TryCancel(); }

 protected:
  grpc::ClientContext context_;
};

// Server streaming: the request is sent, nothing is read.
template <typename Request, typename Response>
class UnreadStream final : public HeldStream,
                           public grpc::ClientReadReactor<Response> {
 public:
  using StartFn = std::function<void(grpc::ClientContext*, const Request*,
                                     grpc::ClientReadReactor<Response>*)>;
  UnreadStream(Request request, StreamTally* tally, const StartFn& start)
      : request_(std::move(request)), tally_(tally) {
    tally_->Started();
    start(&context_, &request_, this);
    this->StartCall();
  }
  void OnDone(const grpc::Status& status) override {
    tally_->Finished(status.error_code());
  }

 private:
  const Request request_;
  StreamTally* tally_;
};

// Bidirectional: nothing sent (not even a half-close), nothing read.
template <typename Request, typename Response>
class SilentBidiStream final
    : public HeldStream,
      public grpc::ClientBidiReactor<Request, Response> {
 public:
  using StartFn = std::function<void(
      grpc::ClientContext*, grpc::ClientBidiReactor<Request, Response>*)>;
  SilentBidiStream(StreamTally* tally, const StartFn& start) : tally_(tally) {
    tally_->Started();
    start(&context_, this);
    this->StartCall();
  }
  void OnDone(const grpc::Status& status) override {
    tally_->Finished(status.error_code());
  }

 private:
  StreamTally* tally_;
};

// `n` channels to `target`, each on a TCP connection of its own (channels
// with equal arguments would share one).
std::vector<std::shared_ptr<grpc::Channel>> Connections(
    const std::string& target, int n) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args = MakeChannelArguments(ChannelOptions{});
    args.SetInt("rl.bounds_bench.connection", i);
    channels.push_back(grpc::CreateCustomChannel(
        target, Security::ProcessDefault()->ChannelCredentials(target), args));
  }
  return channels;
}

// Cancels every stream, waits for every OnDone, then frees them. A stream
// whose OnDone never came is leaked rather than freed under gRPC's feet.
void HangUp(std::vector<std::unique_ptr<HeldStream>>& streams,
            const std::vector<StreamTally*>& tallies) {
  for (auto& s : streams) s->Cancel();
  bool all = true;
  for (StreamTally* t : tallies) all &= t->WaitAllDone(absl::Seconds(30));
  if (!all) {
    std::printf("  (some streams did not end 30 s after cancel; leaked)\n");
    for (auto& s : streams) (void)s.release();
  }
  streams.clear();
}

// GET `path` from 127.0.0.1:`port` (HTTP/1.0); the body, or empty.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, request.data(), request.size()) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[8192];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
        response.append(buffer, n);
      }
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// Prometheus samples whose line starts with one of `prefixes`, non-zero.
std::string MetricLines(const std::string& text,
                        const std::vector<std::string>& prefixes) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "#")) continue;
    for (const std::string& p : prefixes) {
      if (absl::StartsWith(line, p) && !absl::EndsWith(line, " 0")) {
        out.emplace_back(line);
      }
    }
  }
  return absl::StrJoin(out, "\n    ");
}

// ---------------------------------------------------------------------------
// The table.

struct Phase {
  std::string name;
  ProcessSample sample;
};

void PrintTable(const std::vector<Phase>& phases) {
  std::printf("  %-32s %8s %7s %8s %6s %7s %8s %7s\n", "phase", "RSS MiB",
              "x idle", "peak MiB", "FDs", "x idle", "threads", "x idle");
  const ProcessSample& idle = phases.front().sample;
  for (const Phase& p : phases) {
    const ProcessSample& s = p.sample;
    std::printf("  %-32s %8.1f %7.2f %8.1f %6d %7.2f %8d %7.2f\n",
                p.name.c_str(), s.rss_mib, s.rss_mib / idle.rss_mib, s.peak_mib,
                s.fds, static_cast<double>(s.fds) / idle.fds, s.threads,
                static_cast<double>(s.threads) / idle.threads);
  }
}

std::string LogTail(const ServerProcess& server) {
  const std::string log = server.Log();
  return log.size() > 2000 ? log.substr(log.size() - 2000) : log;
}

// Samples `server` (settled briefly) into `phases` under `name`.
bool Record(ServerProcess& server, const std::string& name,
            std::vector<Phase>& phases) {
  std::optional<ProcessSample> s =
      SettledSample(server.pid(), absl::Seconds(1), absl::Seconds(15));
  if (!s.has_value()) {
    std::printf("  %s: process gone during '%s'; its log ends:\n%s\n",
                server.name().c_str(), name.c_str(), LogTail(server).c_str());
    return false;
  }
  phases.push_back({name, *s});
  return true;
}

// After the clients closed their connections: until FDs and threads are
// still for 2 s (at most 30 s).
bool RecordAfter(ServerProcess& server, const std::string& suffix,
                 std::vector<Phase>& phases) {
  absl::Duration took;
  std::optional<ProcessSample> s =
      SettledSample(server.pid(), absl::Seconds(2), absl::Seconds(30), &took);
  if (!s.has_value()) {
    std::printf(
        "  %s: process gone after the clients left; its log ends:\n%s\n",
        server.name().c_str(), LogTail(server).c_str());
    return false;
  }
  phases.push_back({absl::StrFormat("after clients left%s (+%.1f s)", suffix,
                                    absl::ToDoubleSeconds(took)),
                    *s});
  return true;
}

// ---------------------------------------------------------------------------
// Telemetry.

struct IngestResult {
  grpc::StatusCode code = grpc::StatusCode::OK;
  int64_t sent = 0;
  int64_t acked = 0;
};

// Sends `batches` on one Ingest stream (acks read alongside) and closes it.
IngestResult Ingest(TelemetryService::Stub& stub,
                    const std::vector<MetricBatch>& batches) {
  auto context = ContextWithDeadline(absl::Seconds(180));
  auto stream = stub.Ingest(context.get());
  IngestResult result;
  std::thread acks([&] {
    IngestAck ack;
    while (stream->Read(&ack)) result.acked = ack.acked_sequence_number();
  });
  for (const MetricBatch& b : batches) {
    if (!stream->Write(b)) break;
    ++result.sent;
  }
  stream->WritesDone();
  acks.join();
  result.code = stream->Finish().error_code();
  return result;
}

std::vector<MetricBatch> TelemetryLoad(int runs, int flood_points, int round) {
  std::vector<MetricBatch> batches;
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  // New points each round: a new incarnation, later steps.
  int64_t step = int64_t{round} * 10000000;
  auto batch = [&](const std::string& run_id) -> MetricBatch& {
    MetricBatch& b = batches.emplace_back();
    b.set_sequence_number(batches.size());
    b.set_run_id(run_id);
    b.set_source("bounds_bench");
    b.set_incarnation(round);
    return b;
  };
  for (int done = 0; done < flood_points;) {
    MetricBatch& b = batch("watched");
    for (int i = 0; i < 1000 && done < flood_points; ++i, ++done) {
      MetricPoint* p = b.add_points();
      p->set_name("loss");
      p->set_step(++step);
      p->set_wall_time_ns(now_ns);
      p->set_value(1.0 / step);
    }
  }
  for (int r = 0; r < runs; ++r) {
    MetricBatch& b = batch(absl::StrFormat("run-%05d", r));
    for (int i = 0; i < 10; ++i) {
      MetricPoint* p = b.add_points();
      p->set_name(i % 2 == 0 ? "loss" : "return");
      p->set_step(step + i);
      p->set_wall_time_ns(now_ns);
      p->set_value(i);
    }
  }
  return batches;
}

// " #2" for the second round when there are several.
std::string RoundSuffix(int round) {
  return absl::GetFlag(FLAGS_rounds) > 1 ? absl::StrCat(" #", round) : "";
}

bool BenchTelemetry(const std::string& dir) {
  const int watchers = absl::GetFlag(FLAGS_telemetry_watchers);
  const int runs = absl::GetFlag(FLAGS_telemetry_runs);
  const int flood = absl::GetFlag(FLAGS_watch_flood_points);
  const int connections = absl::GetFlag(FLAGS_connections);
  const std::string http_port_file = dir + "/telemetry.http_port";
  auto server = ServerProcess::Start(
      "telemetry", "telemetry/telemetry_main",
      {"--http_port=0", "--http_port_file=" + http_port_file,
       "--store=" + dir + "/telemetry.db",
       "--tensorboard_dir=" + dir + "/tensorboard",
       // The bench's one client makes --telemetry_runs runs at once: it
       // measures what they cost, not the per-source rate limit.
       "--max_new_runs_per_source_per_minute=0"},
      dir);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return false;
  }
  ServerProcess& telemetry = **server;
  int http_port = 0;
  if (auto text = WaitForFile(http_port_file, absl::Seconds(30))) {
    (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &http_port);
  }
  std::printf(
      "\n== telemetry_main (pid %d; defaults: max_watchers 64, "
      "max_open_event_files 64, max_watch_backlog_bytes 4 MiB)\n"
      "  each round: %d Watch streams of one run, never read, over %d "
      "connections; %d points into that run; 10 points into each of %d "
      "runs; then the client leaves\n",
      telemetry.pid(), watchers, connections, flood, runs);
  std::vector<Phase> phases;
  if (!Record(telemetry, "idle", phases)) return false;

  for (int round = 1; round <= absl::GetFlag(FLAGS_rounds); ++round) {
    std::vector<std::unique_ptr<HeldStream>> streams;
    StreamTally watch_tally;
    auto channels = Connections(telemetry.address(), connections);
    std::vector<std::unique_ptr<TelemetryService::Stub>> stubs;
    for (auto& c : channels) stubs.push_back(TelemetryService::NewStub(c));
    using Watch = UnreadStream<WatchRequest, MetricPoint>;
    for (int i = 0; i < watchers; ++i) {
      TelemetryService::Stub* stub = stubs[i % stubs.size()].get();
      WatchRequest request;
      request.set_run_id("watched");
      streams.push_back(std::make_unique<Watch>(
          request, &watch_tally,
          [stub](grpc::ClientContext* c, const WatchRequest* r,
                 grpc::ClientReadReactor<MetricPoint>* reactor) {
            stub->async()->Watch(c, r, reactor);
          }));
    }
    watch_tally.WaitQuiet(absl::Seconds(1), absl::Seconds(30));
    if (!Record(telemetry, "streams held" + RoundSuffix(round), phases)) {
      return false;
    }
    const CodeCounts refused_watches = watch_tally.finished();
    const IngestResult ingest =
        Ingest(*stubs.front(), TelemetryLoad(runs, flood, round));
    if (!Record(telemetry, "under load" + RoundSuffix(round), phases)) {
      return false;
    }
    const std::string metrics =
        http_port > 0 ? HttpGet(http_port, "/metrics") : "";
    std::printf("  round %d, refused by the server before the client left:\n",
                round);
    std::printf("    Watch x%d: %s (%d still open, then cancelled)\n", watchers,
                FormatCodes(refused_watches).c_str(), watch_tally.open());
    std::printf("    Ingest x%lld batches (one stream): %s, %lld acked\n",
                static_cast<long long>(ingest.sent), CodeName(ingest.code),
                static_cast<long long>(ingest.acked));
    std::printf(
        "  server's counters (/metrics, totals so far):\n    %s\n",
        MetricLines(metrics, {"telemetry_refused_total", "telemetry_watchers",
                              "telemetry_open_event_files",
                              "telemetry_watch_backlog_bytes",
                              "telemetry_tensorboard_dropped"})
            .c_str());
    HangUp(streams, {&watch_tally});
    stubs.clear();
    channels.clear();  // the client's connections close
    if (!RecordAfter(telemetry, RoundSuffix(round), phases)) return false;
  }
  PrintTable(phases);
  std::printf("  %s\n", telemetry.Stop().c_str());
  return true;
}

// ---------------------------------------------------------------------------
// Coordinator.

bool BenchCoordinator(const std::string& dir) {
  const int runs = absl::GetFlag(FLAGS_coordinator_runs);
  const int connections = absl::GetFlag(FLAGS_connections);
  // No --local_workers: no workers and no local telemetry, so runs queue.
  auto server = ServerProcess::Start(
      "coordinator", "coordinator/coordinator_main",
      {"--store=" + dir + "/coordinator.db", "--runs_dir=" + dir + "/runs",
       "--log_dir=" + dir + "/logs"},
      dir);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return false;
  }
  ServerProcess& coordinator = **server;
  std::printf(
      "\n== coordinator_main (pid %d, no workers)\n"
      "  each round: %d runs submitted (they stay queued), a WatchRun stream "
      "each, never read, over %d connections; the streams abandoned, the "
      "runs cancelled, the client leaves\n",
      coordinator.pid(), runs, connections);
  std::vector<Phase> phases;
  if (!Record(coordinator, "idle", phases)) return false;

  for (int round = 1; round <= absl::GetFlag(FLAGS_rounds); ++round) {
    std::vector<std::unique_ptr<HeldStream>> streams;
    StreamTally watch_tally;
    CodeCounts submitted, cancelled;
    auto channels = Connections(coordinator.address(), connections);
    std::vector<std::unique_ptr<RunService::Stub>> stubs;
    for (auto& c : channels) stubs.push_back(RunService::NewStub(c));
    std::vector<std::string> run_ids;
    for (int i = 0; i < runs; ++i) {
      SubmitRunRequest request;
      request.mutable_spec()->set_name(absl::StrCat("bounds-", round, "-", i));
      request.mutable_spec()->mutable_env()->set_id("CartPole-v1");
      SubmitRunResponse response;
      auto context = ContextWithDeadline(absl::Seconds(30));
      const grpc::Status status =
          stubs[i % stubs.size()]->SubmitRun(context.get(), request, &response);
      ++submitted[status.error_code()];
      // A refused submission's stream watches an unknown run instead.
      run_ids.push_back(status.ok() ? response.run().run_id()
                                    : absl::StrCat("unknown-", i));
    }
    using Watch = UnreadStream<WatchRunRequest, RunEvent>;
    for (int i = 0; i < runs; ++i) {
      RunService::Stub* stub = stubs[i % stubs.size()].get();
      WatchRunRequest request;
      request.set_run_id(run_ids[i]);
      streams.push_back(std::make_unique<Watch>(
          request, &watch_tally,
          [stub](grpc::ClientContext* c, const WatchRunRequest* r,
                 grpc::ClientReadReactor<RunEvent>* reactor) {
            stub->async()->WatchRun(c, r, reactor);
          }));
    }
    watch_tally.WaitQuiet(absl::Seconds(1), absl::Seconds(30));
    if (!Record(coordinator, "under load" + RoundSuffix(round), phases)) {
      return false;
    }
    const CodeCounts refused_watches = watch_tally.finished();
    const int open_watches = watch_tally.open();
    HangUp(streams, {&watch_tally});
    for (int i = 0; i < runs; ++i) {
      CancelRunRequest request;
      request.set_run_id(run_ids[i]);
      Run run;
      auto context = ContextWithDeadline(absl::Seconds(30));
      ++cancelled[stubs[i % stubs.size()]
                      ->CancelRun(context.get(), request, &run)
                      .error_code()];
    }
    std::printf("  round %d, answered by the server before the client left:\n",
                round);
    std::printf("    SubmitRun x%d: %s\n", runs,
                FormatCodes(submitted).c_str());
    std::printf(
        "    WatchRun x%d: ended by the server: %s (%d still open, "
        "then cancelled)\n",
        runs, FormatCodes(refused_watches).c_str(), open_watches);
    std::printf("    CancelRun x%d: %s\n", runs,
                FormatCodes(cancelled).c_str());
    stubs.clear();
    channels.clear();  // the client's connections close
    if (!RecordAfter(coordinator, RoundSuffix(round), phases)) return false;
  }
  PrintTable(phases);
  std::printf("  %s\n", coordinator.Stop().c_str());
  return true;
}

// ---------------------------------------------------------------------------
// Learner.

bool BenchLearner(const std::string& dir) {
  const int subscribers = absl::GetFlag(FLAGS_policy_subscribers);
  const int rollouts = absl::GetFlag(FLAGS_rollout_streams);
  const int connections = absl::GetFlag(FLAGS_connections);
  const std::string run_file = BenchFilePath(absl::GetFlag(FLAGS_learner_run));
  // Standalone, no actors: it serves and waits for rollouts.
  auto server = ServerProcess::Start(
      "learner", "learner/learner_main",
      {"--run=" + run_file, "--run_dir=" + dir + "/learner_run",
       "--torch_threads=1"},
      dir);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return false;
  }
  ServerProcess& learner = **server;
  std::printf(
      "\n== learner_main (pid %d, standalone on %s, no actors)\n"
      "  each round: %d SubscribePolicy streams never read, %d "
      "StreamRollouts streams sending nothing, over %d connections; then "
      "the client hangs up\n",
      learner.pid(), absl::GetFlag(FLAGS_learner_run).c_str(), subscribers,
      rollouts, connections);
  std::vector<Phase> phases;
  if (!Record(learner, "idle", phases)) return false;

  for (int round = 1; round <= absl::GetFlag(FLAGS_rounds); ++round) {
    std::vector<std::unique_ptr<HeldStream>> streams;
    StreamTally policy_tally, rollout_tally;
    auto channels = Connections(learner.address(), connections);
    std::vector<std::unique_ptr<LearnerService::Stub>> stubs;
    for (auto& c : channels) stubs.push_back(LearnerService::NewStub(c));
    using Subscribe = UnreadStream<SubscribePolicyRequest, PolicyUpdate>;
    for (int i = 0; i < subscribers; ++i) {
      LearnerService::Stub* stub = stubs[i % stubs.size()].get();
      SubscribePolicyRequest request;
      request.set_actor_id(i);
      streams.push_back(std::make_unique<Subscribe>(
          request, &policy_tally,
          [stub](grpc::ClientContext* c, const SubscribePolicyRequest* r,
                 grpc::ClientReadReactor<PolicyUpdate>* reactor) {
            stub->async()->SubscribePolicy(c, r, reactor);
          }));
    }
    using Rollouts = SilentBidiStream<RolloutSegment, RolloutAck>;
    for (int i = 0; i < rollouts; ++i) {
      LearnerService::Stub* stub = stubs[i % stubs.size()].get();
      streams.push_back(std::make_unique<Rollouts>(
          &rollout_tally,
          [stub](grpc::ClientContext* c,
                 grpc::ClientBidiReactor<RolloutSegment, RolloutAck>* reactor) {
            stub->async()->StreamRollouts(c, reactor);
          }));
    }
    policy_tally.WaitQuiet(absl::Seconds(1), absl::Seconds(30));
    rollout_tally.WaitQuiet(absl::Seconds(1), absl::Seconds(30));
    if (!Record(learner, "under load" + RoundSuffix(round), phases)) {
      return false;
    }
    std::printf("  round %d, refused by the server before the client left:\n",
                round);
    std::printf("    SubscribePolicy x%d: %s (%d still open, then cancelled)\n",
                subscribers, FormatCodes(policy_tally.finished()).c_str(),
                policy_tally.open());
    std::printf("    StreamRollouts x%d: %s (%d still open, then cancelled)\n",
                rollouts, FormatCodes(rollout_tally.finished()).c_str(),
                rollout_tally.open());
    HangUp(streams, {&policy_tally, &rollout_tally});
    stubs.clear();
    channels.clear();  // the client's connections close
    if (!RecordAfter(learner, RoundSuffix(round), phases)) return false;
  }
  PrintTable(phases);
  std::printf("  %s\n", learner.Stop().c_str());
  return true;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // The whole run is bounded; the servers get SIGTERM when this exits.
  absl::Notification finished;
  std::thread watchdog([&finished] {
    const absl::Duration limit = absl::Seconds(absl::GetFlag(FLAGS_deadline_s));
    if (!finished.WaitForNotificationWithTimeout(limit)) {
      std::fprintf(stderr, "bounds_bench: over --deadline_s=%g; exiting\n",
                   absl::GetFlag(FLAGS_deadline_s));
      std::fflush(nullptr);
      std::_Exit(1);
    }
  });
  const std::string dir = (std::filesystem::temp_directory_path() /
                           absl::StrCat("rl_bounds_bench.", getpid()))
                              .string();
  std::filesystem::create_directories(dir);
  std::printf(
      "bounds_bench: RSS (VmRSS), peak RSS (VmHWM), open FDs and "
      "threads of each server process, from /proc; logs in %s\n",
      dir.c_str());
  bool ok = true;
  const std::string servers = absl::GetFlag(FLAGS_servers);
  for (absl::string_view name : absl::StrSplit(servers, ',')) {
    if (name == "telemetry") {
      ok &= rl::BenchTelemetry(dir);
    } else if (name == "coordinator") {
      ok &= rl::BenchCoordinator(dir);
    } else if (name == "learner") {
      ok &= rl::BenchLearner(dir);
    } else {
      std::fprintf(stderr, "unknown server '%s'\n", std::string(name).c_str());
      ok = false;
    }
    std::fflush(stdout);
  }
  finished.Notify();
  watchdog.join();
  if (ok) std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}
