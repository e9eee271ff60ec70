// Cost of distribution: env steps/s of one learner + one actor (two
// processes, one host, ASYNC mode) next to the local trainer (one
// process) with the same run file, alternating over rounds in one run
// (local first in odd rounds, distributed first in even ones, so a drift of
// the machine's load does not favour one leg). Per round: each leg's steps/s,
// the CPU its processes and all others used, and the ratio; then the median
// ratio next to the run's goal, where the time went in each process, and
// peak memory. Default: examples/cartpole_throughput.yaml (goal >= 95%) and
// bench/cartpole_cleanrl.yaml (CleanRL's shapes, goal >= 90%).
//
//   bazel run --config=opt //bench:distributed_bench -- [--rounds=3]
//       [--runs=RUN_FILE:GOAL_PERCENT:STEPS,...]
//
// (or bazel-bin/bench/distributed_bench: relative run files and the
// learner and actor binaries are found as bench/bench_files.h says)
//
// Steps/s are taken over the steady part of each leg (from the first
// completed update to the last), so process start-up is not counted. The
// distributed leg's time split comes from the processes' own metrics
// (actor/env_seconds, actor/inference_seconds, actor/segment_send_seconds,
// learner/update_seconds), streamed to a small sink in this process that
// only sums them; the local trainer streams its metrics to the same sink so
// that both legs pay for emitting. CPU and peak RSS of the two processes come
// from /proc.
#include <sys/resource.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_files.h"
#include "common/grpc_util.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"
#include "proto/learner.grpc.pb.h"
#include "proto/telemetry.grpc.pb.h"
#include "runspec/run_spec.h"
#include "telemetry/client/emitter.h"
#include "telemetry/client/grpc_transport.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, runs,
          "examples/cartpole_throughput.yaml:95:1000000,"
          "bench/cartpole_cleanrl.yaml:90:200000",
          "Comma-separated RUN_FILE:GOAL_PERCENT:STEPS: each run file is "
          "measured with STEPS env steps a leg, against the goal "
          "distributed/local >= GOAL_PERCENT");
ABSL_FLAG(int, rounds, 3, "rounds of (local, distributed) legs per run file");
ABSL_FLAG(int, max_policy_lag, 1, "ASYNC mode's lag bound");
// 1, as rl_local's and learner_main's defaults (see local_training_bench).
ABSL_FLAG(int, local_torch_threads, 1, "LibTorch threads of the local trainer");
ABSL_FLAG(int, learner_torch_threads, 1,
          "LibTorch threads of the learner process (the actor uses 1)");
ABSL_FLAG(bool, telemetry, true,
          "Both legs stream their metrics to the sink in this process (the "
          "distributed leg's time split needs them); false: neither does");

namespace rl {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The time-split metrics the learner and actor processes emit, kept with
// their wall times; everything else is acknowledged and dropped. A batch
// seen before (a resend after a reconnect) is not counted twice.
class MetricSumSink final : public TelemetryService::Service {
 public:
  grpc::Status Ingest(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<IngestAck, MetricBatch>* stream) override {
    MetricBatch batch;
    while (stream->Read(&batch)) {
      {
        absl::MutexLock lock(&mu_);
        int64_t& last = last_sequence_[absl::StrCat(batch.source(), "#",
                                                    batch.incarnation())];
        if (batch.sequence_number() > last) {
          last = batch.sequence_number();
          // Only the processes' points: the local trainer's go nowhere.
          if (absl::StartsWith(batch.source(), "learner") ||
              absl::StartsWith(batch.source(), "actor")) {
            for (const MetricPoint& p : batch.points()) {
              if (kKept.count(p.name()) == 0) continue;
              points_.push_back({p.name(), p.wall_time_ns(), p.value()});
            }
          }
        }
      }
      IngestAck ack;
      ack.set_acked_sequence_number(batch.sequence_number());
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }

  // Sum of `name`'s values (with `inverse`, of 1 / value over the positive
  // ones) emitted within [from, to].
  double Sum(const std::string& name, absl::Time from, absl::Time to,
             bool inverse = false) {
    const int64_t a = absl::ToUnixNanos(from), b = absl::ToUnixNanos(to);
    absl::MutexLock lock(&mu_);
    double sum = 0;
    for (const Point& p : points_) {
      if (p.name != name || p.wall_ns < a || p.wall_ns > b) continue;
      if (!inverse) {
        sum += p.value;
      } else if (p.value > 0) {
        sum += 1 / p.value;
      }
    }
    return sum;
  }

  void Clear() {
    absl::MutexLock lock(&mu_);
    points_.clear();
  }

 private:
  struct Point {
    std::string name;
    int64_t wall_ns;
    double value;
  };
  inline static const std::set<std::string> kKept = {
      "actor/env_seconds", "actor/inference_seconds",
      "actor/env_steps_per_second", "actor/segment_send_seconds",
      "learner/update_seconds"};

  absl::Mutex mu_;
  std::map<std::string, int64_t> last_sequence_ ABSL_GUARDED_BY(mu_);
  std::vector<Point> points_ ABSL_GUARDED_BY(mu_);
};

// CPU seconds and peak RSS of a process, from /proc.
struct ProcSample {
  double cpu_seconds = 0;
  double peak_mib = 0;
};

std::optional<ProcSample> ReadProc(pid_t pid) {
  std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(stat_file)),
                   std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  // Fields after the command name: state(3) ppid(4) ... utime(14) stime(15).
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(paren + 2), ' ', absl::SkipEmpty());
  if (fields.size() < 13) return std::nullopt;
  ProcSample sample;
  const double ticks = sysconf(_SC_CLK_TCK);
  sample.cpu_seconds =
      (std::atof(fields[11].c_str()) + std::atof(fields[12].c_str())) / ticks;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmHWM:")) {
      sample.peak_mib = std::atof(line.c_str() + 6) / 1024.0;
    }
  }
  return sample;
}

// The child of this process whose program path ends in `program`.
std::optional<pid_t> FindChild(const std::string& program) {
  const std::string self = std::to_string(getpid());
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    pid_t pid;
    if (!absl::SimpleAtoi(name, &pid)) continue;
    std::ifstream stat_file(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)),
                     std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::vector<std::string> fields =
        absl::StrSplit(stat.substr(paren + 2), ' ', absl::SkipEmpty());
    if (fields.size() < 2 || fields[1] != self) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string argv0;
    std::getline(cmdline, argv0, '\0');
    if (absl::EndsWith(argv0, program)) return pid;
  }
  return std::nullopt;
}

// CPU seconds the whole machine spent busy (not idle, not waiting for I/O).
double MachineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0,
         softirq = 0, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >>
      steal;
  return (user + nice + system + irq + softirq + steal) / sysconf(_SC_CLK_TCK);
}

double CpuSecondsOfSelf() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
         usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
}

struct LocalLeg {
  double steps_per_second = 0;
  double seconds = 0;  // the measured window
  TimeBreakdown time;  // within the window
  double cpu_seconds = 0;
  // CPU seconds of every other process on the machine within the window.
  double others_cpu = 0;
};

struct DistributedLeg {
  double steps_per_second = 0;
  double seconds = 0;  // the measured window
  // Within the window, from the processes' metrics.
  double actor_env = 0;
  double actor_inference = 0;
  double actor_collect = 0;   // whole segments: env + inference + the rest
  double actor_send = 0;      // the sender thread's blocking Write calls
  double learner_update = 0;  // PPO epochs, GAE included
  // Within the window, from /proc.
  double learner_cpu = 0;
  double actor_cpu = 0;
  double others_cpu = 0;  // not the learner, the actor or this process
  // Over the processes' lives.
  double learner_peak_mib = 0;
  double actor_peak_mib = 0;
};

absl::StatusOr<LocalLeg> RunLocal(const RunSpec& spec, Emitter* emitter) {
  torch::set_num_threads(absl::GetFlag(FLAGS_local_torch_threads));
  TrainerOptions options;
  options.emitter = emitter;
  auto trainer = LocalTrainer::Create(spec, options);
  if (!trainer.ok()) return trainer.status();
  auto warm_up = (*trainer)->Train(nullptr, 1);  // one update, not counted
  if (!warm_up.ok()) return warm_up.status();
  const int64_t steps0 = (*trainer)->progress().env_steps;
  const double cpu0 = CpuSecondsOfSelf();
  const double machine0 = MachineBusySeconds();
  const auto start = Clock::now();
  auto result = (*trainer)->Train();
  if (!result.ok()) return result.status();
  LocalLeg leg;
  leg.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  leg.cpu_seconds = CpuSecondsOfSelf() - cpu0;
  // Samples taken a moment apart can make it slightly negative.
  leg.others_cpu =
      std::max(0.0, MachineBusySeconds() - machine0 - leg.cpu_seconds);
  leg.steps_per_second =
      ((*trainer)->progress().env_steps - steps0) / leg.seconds;
  const TimeBreakdown& a = warm_up->time;
  const TimeBreakdown& b = result->time;
  leg.time = {b.env - a.env, b.inference - a.inference, b.gae - a.gae,
              b.update - a.update, b.other - a.other};
  return leg;
}

absl::StatusOr<DistributedLeg> RunDistributed(const RunSpec& spec,
                                              const std::string& dir,
                                              const std::string& telemetry,
                                              MetricSumSink* sink) {
  std::string json;
  google::protobuf::util::MessageToJsonString(spec, &json);
  const std::string run_file = dir + "/run.json";
  std::ofstream(run_file) << json;
  const std::string port_file = dir + "/port";
  fs::remove(port_file);
  const std::string learner_main = BenchFilePath("learner/learner_main");
  const std::string actor_main = BenchFilePath("actor/actor_main");
  Subprocess learner({learner_main, "--run=" + run_file,
                      "--port_file=" + port_file, "--telemetry=" + telemetry,
                      absl::StrCat("--torch_threads=",
                                   absl::GetFlag(FLAGS_learner_torch_threads))},
                     dir + "/learner.log", /*die_with_parent=*/true);
  auto port = WaitForFile(port_file, absl::Seconds(60));
  if (!port) {
    return absl::DeadlineExceededError(
        absl::StrCat("the learner wrote no port file:\n", learner.Log()));
  }
  const std::string address =
      absl::StrCat("127.0.0.1:", std::atoi(port->c_str()));
  Subprocess actor({actor_main, "--learner=" + address, "--run=" + run_file,
                    "--telemetry=" + telemetry},
                   dir + "/actor.log", /*die_with_parent=*/true);
  const std::optional<pid_t> learner_pid = FindChild(learner_main);
  std::optional<pid_t> actor_pid = FindChild(actor_main);

  DistributedLeg leg;
  auto stub = LearnerService::NewStub(CreateChannel(address));
  int64_t first_steps = -1, last_steps = 0;
  absl::Time first_time, last_time;
  ProcSample learner_first, learner_last, actor_first, actor_last;
  double machine_first = 0, machine_last = 0, self_first = 0, self_last = 0;
  while (learner.running()) {
    if (!actor_pid) actor_pid = FindChild(actor_main);
    std::optional<ProcSample> l, a;
    if (learner_pid) l = ReadProc(*learner_pid);
    if (actor_pid) a = ReadProc(*actor_pid);
    if (l) leg.learner_peak_mib = std::max(leg.learner_peak_mib, l->peak_mib);
    if (a) leg.actor_peak_mib = std::max(leg.actor_peak_mib, a->peak_mib);
    LearnerStatus status;
    auto context = ContextWithDeadline(absl::Seconds(2));
    if (stub->GetStatus(context.get(), GetLearnerStatusRequest(), &status)
            .ok()) {
      const absl::Time now = absl::Now();
      if (status.updates() >= 1 && first_steps < 0) {
        first_steps = status.env_steps();
        first_time = now;
        if (l) learner_first = *l;
        if (a) actor_first = *a;
        machine_first = MachineBusySeconds();
        self_first = CpuSecondsOfSelf();
      }
      if (first_steps >= 0 && status.env_steps() > last_steps) {
        last_steps = status.env_steps();
        last_time = now;
        if (l) learner_last = *l;
        if (a) actor_last = *a;
        machine_last = MachineBusySeconds();
        self_last = CpuSecondsOfSelf();
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  actor.Wait(absl::Seconds(30));
  if (first_steps < 0 || last_time <= first_time) {
    return absl::InternalError(absl::StrCat(
        "the distributed leg made no measurable progress; learner log:\n",
        learner.Log(), "\nactor log:\n", actor.Log()));
  }
  leg.seconds = absl::ToDoubleSeconds(last_time - first_time);
  leg.steps_per_second = (last_steps - first_steps) / leg.seconds;
  leg.learner_cpu = learner_last.cpu_seconds - learner_first.cpu_seconds;
  leg.actor_cpu = actor_last.cpu_seconds - actor_first.cpu_seconds;
  leg.others_cpu =
      std::max(0.0, machine_last - machine_first - leg.learner_cpu -
                        leg.actor_cpu - (self_last - self_first));
  if (sink != nullptr) {
    // The processes flush their metrics as they exit: all are in by now.
    leg.actor_env = sink->Sum("actor/env_seconds", first_time, last_time);
    leg.actor_inference =
        sink->Sum("actor/inference_seconds", first_time, last_time);
    // Each segment's steps/s is its steps over its collection time.
    leg.actor_collect =
        static_cast<double>(spec.segment_length()) * spec.envs_per_actor() *
        sink->Sum("actor/env_steps_per_second", first_time, last_time,
                  /*inverse=*/true);
    leg.actor_send =
        sink->Sum("actor/segment_send_seconds", first_time, last_time);
    leg.learner_update =
        sink->Sum("learner/update_seconds", first_time, last_time);
    sink->Clear();
  }
  return leg;
}

struct RunCase {
  std::string file;
  double goal_percent = 0;
  int64_t steps = 0;
};

absl::StatusOr<std::vector<RunCase>> ParseRuns(const std::string& flag) {
  std::vector<RunCase> cases;
  for (absl::string_view item : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(item, ':');
    RunCase c;
    if (parts.size() != 3 || !absl::SimpleAtod(parts[1], &c.goal_percent) ||
        !absl::SimpleAtoi(parts[2], &c.steps) || c.steps <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--runs: expected RUN_FILE:GOAL_PERCENT:STEPS, got '", item, "'"));
    }
    c.file = parts[0];
    cases.push_back(c);
  }
  return cases;
}

double Percent(double part, double whole) {
  return whole > 0 ? 100 * part / whole : 0;
}

int BenchRun(const RunCase& run_case, int rounds, const std::string& dir,
             const std::string& telemetry, MetricSumSink* sink,
             Emitter* local_emitter) {
  auto spec = LoadRunSpecFile(BenchFilePath(run_case.file));
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  spec->set_total_env_steps(run_case.steps);
  spec->clear_target_return();
  spec->set_checkpoint_interval(0);
  spec->set_sync_mode(ASYNC);
  spec->set_max_policy_lag(absl::GetFlag(FLAGS_max_policy_lag));
  spec->mutable_resources()->set_num_actors(1);
  spec->mutable_resources()->set_min_actors(1);
  const PPOConfig& ppo = spec->ppo();
  std::printf(
      "\n== %s: %d envs x %d steps, %d epochs x %d minibatches, lr %g; "
      "ASYNC, max_policy_lag %d; %lld env steps a leg\n",
      run_case.file.c_str(), spec->envs_per_actor(), spec->segment_length(),
      ppo.num_epochs(), ppo.num_minibatches(), ppo.learning_rate(),
      spec->max_policy_lag(), static_cast<long long>(run_case.steps));
  std::printf(
      "local: 1 process, torch %d threads | distributed: learner (torch %d) "
      "+ 1 actor (torch 1), gRPC on loopback, same host\n",
      absl::GetFlag(FLAGS_local_torch_threads),
      absl::GetFlag(FLAGS_learner_torch_threads));
  // cores: CPU seconds per second of the window, of the leg's own
  // processes / of every other process on the machine (noise).
  std::printf("%-6s %-11s %14s %11s %15s %11s %13s\n", "round", "order",
              "local steps/s", "cores/other", "distr. steps/s", "cores/other",
              "distr./local");
  std::fflush(stdout);

  std::vector<double> ratios;
  LocalLeg local_sum;
  DistributedLeg dist_sum;
  for (int round = 1; round <= rounds; ++round) {
    const bool local_first = round % 2 == 1;
    absl::StatusOr<LocalLeg> local;
    absl::StatusOr<DistributedLeg> dist;
    for (int leg = 0; leg < 2; ++leg) {
      if ((leg == 0) == local_first) {
        local = RunLocal(*spec, local_emitter);
      } else {
        dist = RunDistributed(*spec, dir, telemetry, sink);
      }
    }
    if (!local.ok() || !dist.ok()) {
      std::fprintf(
          stderr, "round %d: %s\n", round,
          (!local.ok() ? local.status() : dist.status()).ToString().c_str());
      return 1;
    }
    const double ratio = dist->steps_per_second / local->steps_per_second;
    ratios.push_back(ratio);
    const double dist_cores =
        (dist->learner_cpu + dist->actor_cpu) / dist->seconds;
    std::printf(
        "%-6d %-11s %14.0f %11s %15.0f %11s %12.1f%%\n", round,
        local_first ? "local,dist" : "dist,local", local->steps_per_second,
        absl::StrFormat("%.2f/%.2f", local->cpu_seconds / local->seconds,
                        local->others_cpu / local->seconds)
            .c_str(),
        dist->steps_per_second,
        absl::StrFormat("%.2f/%.2f", dist_cores,
                        dist->others_cpu / dist->seconds)
            .c_str(),
        100 * ratio);
    std::fflush(stdout);
    local_sum.seconds += local->seconds;
    local_sum.cpu_seconds += local->cpu_seconds;
    local_sum.time.env += local->time.env;
    local_sum.time.inference += local->time.inference;
    local_sum.time.gae += local->time.gae;
    local_sum.time.update += local->time.update;
    local_sum.time.other += local->time.other;
    dist_sum.seconds += dist->seconds;
    dist_sum.actor_env += dist->actor_env;
    dist_sum.actor_inference += dist->actor_inference;
    dist_sum.actor_collect += dist->actor_collect;
    dist_sum.actor_send += dist->actor_send;
    dist_sum.learner_update += dist->learner_update;
    dist_sum.learner_cpu += dist->learner_cpu;
    dist_sum.actor_cpu += dist->actor_cpu;
    dist_sum.learner_peak_mib =
        std::max(dist_sum.learner_peak_mib, dist->learner_peak_mib);
    dist_sum.actor_peak_mib =
        std::max(dist_sum.actor_peak_mib, dist->actor_peak_mib);
  }
  const double median = Median(ratios);
  std::printf(
      "median distributed/local: %.1f%%  (goal >= %.0f%%: %.2fx the goal, "
      "%s)\n",
      100 * median, run_case.goal_percent, 100 * median / run_case.goal_percent,
      100 * median >= run_case.goal_percent ? "met" : "NOT met");

  // Where the time went, summed over the rounds' measured windows.
  const TimeBreakdown& t = local_sum.time;
  const double local_total = t.env + t.inference + t.gae + t.update + t.other;
  std::printf(
      "where the time goes (share of the measured windows, %d rounds):\n",
      rounds);
  std::printf(
      "  local trainer    env %4.1f%% | inference %4.1f%% | GAE %4.1f%% | "
      "update %4.1f%% | other %4.1f%%   (CPU %.2f cores busy)\n",
      Percent(t.env, local_total), Percent(t.inference, local_total),
      Percent(t.gae, local_total), Percent(t.update, local_total),
      Percent(t.other, local_total),
      local_sum.cpu_seconds / std::max(local_sum.seconds, 1e-9));
  const double w = dist_sum.seconds;
  if (sink != nullptr) {
    const double collect_rest =
        std::max(0.0, dist_sum.actor_collect - dist_sum.actor_env -
                          dist_sum.actor_inference);
    std::printf(
        "  actor process    env %4.1f%% | inference %4.1f%% | rest of "
        "collection %4.1f%% | wait (policy, credit, window) %4.1f%% | "
        "wire: Write %4.1f%% on its sender thread   (CPU %.2f cores)\n",
        Percent(dist_sum.actor_env, w), Percent(dist_sum.actor_inference, w),
        Percent(collect_rest, w),
        Percent(std::max(0.0, w - dist_sum.actor_collect), w),
        Percent(dist_sum.actor_send, w), dist_sum.actor_cpu / w);
    std::printf(
        "  learner process  update (GAE included) %4.1f%% | receive, decode, "
        "publish, wait for segments %4.1f%%   (CPU %.2f cores)\n",
        Percent(dist_sum.learner_update, w),
        Percent(std::max(0.0, w - dist_sum.learner_update), w),
        dist_sum.learner_cpu / w);
  } else {
    std::printf(
        "  (distributed split off: --telemetry=false)   CPU learner "
        "%.2f, actor %.2f cores\n",
        dist_sum.learner_cpu / w, dist_sum.actor_cpu / w);
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::printf(
      "peak RSS: this process (local legs so far) %.0f MiB | learner %.0f "
      "MiB | actor %.0f MiB | learner + actor %.0f MiB\n",
      usage.ru_maxrss / 1024.0, dist_sum.learner_peak_mib,
      dist_sum.actor_peak_mib,
      dist_sum.learner_peak_mib + dist_sum.actor_peak_mib);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto cases = rl::ParseRuns(absl::GetFlag(FLAGS_runs));
  if (!cases.ok()) {
    std::fprintf(stderr, "%s\n", cases.status().ToString().c_str());
    return 2;
  }
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const std::string dir = (std::filesystem::temp_directory_path() /
                           absl::StrCat("rl_distributed_bench_", getpid()))
                              .string();
  std::filesystem::create_directories(dir);

  std::unique_ptr<rl::MetricSumSink> sink;
  rl::RunningServer server;
  std::string telemetry;
  std::unique_ptr<rl::Emitter> local_emitter;
  if (absl::GetFlag(FLAGS_telemetry)) {
    sink = std::make_unique<rl::MetricSumSink>();
    auto started = rl::StartServer({sink.get()}, rl::ServerOptions{});
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      return 1;
    }
    server = *std::move(started);
    telemetry = absl::StrCat("127.0.0.1:", server.port);
    rl::EmitterOptions options;
    options.source = "bench-local";
    local_emitter = rl::MakeEmitter(telemetry, options);
  }
  int rc = 0;
  for (const rl::RunCase& run_case : *cases) {
    rc = rl::BenchRun(run_case, rounds, dir, telemetry, sink.get(),
                      local_emitter.get());
    if (rc != 0) break;
  }
  local_emitter.reset();
  if (server.server) {
    server.server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  }
  std::filesystem::remove_all(dir);
  return rc;
}
