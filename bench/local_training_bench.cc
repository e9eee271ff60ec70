// Local training throughput: env steps/s of the whole loop (collection +
// PPO updates) with a throughput-oriented run file, where the time goes, and
// the process's peak memory. With --busy, the same run a second time while a
// child process spins on one core (as another program on a shared machine
// would), and the ratio busy/idle from this one invocation.
//
//   bazel run --config=opt //bench:local_training_bench --
//       [--run=examples/cartpole_throughput.yaml] [--steps=1000000] [--busy]
//
// (or bazel-bin/bench/local_training_bench: a relative --run is found as
// bench/bench_files.h says)
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "bench/bench_files.h"
#include "runspec/run_spec.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, run, "examples/cartpole_throughput.yaml", "run file");
ABSL_FLAG(int64_t, steps, 1000000, "environment steps to train");
// 1, as rl_local's default: the fused CPU path runs on one thread, and a
// second LibTorch thread only spins (1.65 cores for the same steps/s, and
// 0.51x beside a busy process instead of 0.98x at CleanRL's shapes).
ABSL_FLAG(int, torch_threads, 1, "LibTorch intra-op threads");
ABSL_FLAG(int, env_threads, 1, "environment threads");
ABSL_FLAG(bool, busy, false,
          "Also train while a child process spins on one core, and print "
          "busy/idle");

namespace rl {
namespace {

// A child process that spins on one core until this object goes away (or
// this process dies: it gets SIGKILL then).
class BusyChild {
 public:
  BusyChild() {
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;
    }
  }
  ~BusyChild() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  BusyChild(const BusyChild&) = delete;
  BusyChild& operator=(const BusyChild&) = delete;

 private:
  pid_t pid_ = -1;
};

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

struct Leg {
  TrainResult result;
  double cores = 0;        // this process: CPU s per s of the run
  double other_cores = 0;  // every other process on the machine
};

absl::StatusOr<Leg> TrainOnce(const RunSpec& spec) {
  TrainerOptions options;
  options.env_threads = absl::GetFlag(FLAGS_env_threads);
  auto trainer = LocalTrainer::Create(spec, options);
  if (!trainer.ok()) return trainer.status();
  const double self0 = CpuSecondsOfSelf(), machine0 = MachineBusySeconds();
  auto result = (*trainer)->Train();
  if (!result.ok()) return result.status();
  const double self = CpuSecondsOfSelf() - self0;
  const double machine = MachineBusySeconds() - machine0;
  Leg leg{*std::move(result)};
  const double seconds = std::max(leg.result.progress.seconds, 1e-9);
  leg.cores = self / seconds;
  leg.other_cores = std::max(0.0, machine - self) / seconds;
  return leg;
}

void PrintLeg(const char* label, const Leg& leg) {
  const TrainResult& result = leg.result;
  const TimeBreakdown& t = result.time;
  const double total = t.env + t.inference + t.gae + t.update + t.other;
  std::printf(
      "%-9s env steps %lld in %.2f s: %.0f env steps/s  "
      "(goal >= 100000: %.2fx); mean return (100) %.1f\n",
      label, static_cast<long long>(result.progress.env_steps),
      result.progress.seconds, result.progress.steps_per_second,
      result.progress.steps_per_second / 100000.0, result.progress.mean_return);
  std::printf(
      "%-9s time fractions: env %.3f | inference %.3f | GAE %.3f | "
      "update %.3f | other %.3f\n",
      "", t.env / total, t.inference / total, t.gae / total, t.update / total,
      t.other / total);
  std::printf("%-9s CPU: this process %.2f cores, other processes %.2f\n", "",
              leg.cores, leg.other_cores);
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  torch::set_num_threads(absl::GetFlag(FLAGS_torch_threads));
  auto spec = rl::LoadRunSpecFile(rl::BenchFilePath(absl::GetFlag(FLAGS_run)));
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  spec->set_total_env_steps(absl::GetFlag(FLAGS_steps));
  spec->clear_target_return();
  std::printf("run file  %s (%d envs x %d steps, %d epochs x %d minibatches)\n",
              absl::GetFlag(FLAGS_run).c_str(), spec->envs_per_actor(),
              spec->segment_length(), spec->ppo().num_epochs(),
              spec->ppo().num_minibatches());
  std::printf("threads   torch %d, env %d; %ld cores online\n",
              absl::GetFlag(FLAGS_torch_threads),
              absl::GetFlag(FLAGS_env_threads), sysconf(_SC_NPROCESSORS_ONLN));
  std::fflush(stdout);

  auto idle = rl::TrainOnce(*spec);
  if (!idle.ok()) {
    std::fprintf(stderr, "%s\n", idle.status().ToString().c_str());
    return 1;
  }
  rl::PrintLeg(absl::GetFlag(FLAGS_busy) ? "idle" : "", *idle);
  std::fflush(stdout);
  if (absl::GetFlag(FLAGS_busy)) {
    absl::StatusOr<rl::Leg> busy;
    {
      rl::BusyChild spinner;
      busy = rl::TrainOnce(*spec);
    }
    if (!busy.ok()) {
      std::fprintf(stderr, "%s\n", busy.status().ToString().c_str());
      return 1;
    }
    rl::PrintLeg("busy", *busy);
    // Throughput that follows the CPU this process still gets is a fair
    // share; far less per CPU second (threads spinning, or waiting on a
    // descheduled peer) is a collapse.
    const double ratio = busy->result.progress.steps_per_second /
                         idle->result.progress.steps_per_second;
    const double cpu_ratio = busy->cores / std::max(idle->cores, 1e-9);
    const double per_cpu = ratio / std::max(cpu_ratio, 1e-9);
    std::printf(
        "busy/idle %.2f  (one of %ld cores taken by a spinning process; this "
        "process's CPU busy/idle %.2f, steps per CPU second busy/idle %.2f: "
        "%s)\n",
        ratio, sysconf(_SC_NPROCESSORS_ONLN), cpu_ratio, per_cpu,
        per_cpu >= 0.8   ? "follows its CPU share"
        : per_cpu >= 0.5 ? "somewhat below its CPU share"
                         : "COLLAPSES far below its CPU share");
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const double peak_mib = usage.ru_maxrss / 1024.0;
  std::printf("peak memory (RSS) %.0f MiB  (goal <= 1024 MiB: %.2fx)\n",
              peak_mib, peak_mib / 1024.0);
  return 0;
}
