// Local training throughput: env steps/s of the whole loop (collection +
// PPO updates) with a throughput-oriented run file, where the time goes, and
// the process's peak memory.
//
//   bazel run --config=opt //bench:local_training_bench --
//       --run=$PWD/examples/cartpole_throughput.yaml [--steps=1000000]
#include <sys/resource.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "runspec/run_spec.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, run, "examples/cartpole_throughput.yaml", "run file");
ABSL_FLAG(int64_t, steps, 1000000, "environment steps to train");
ABSL_FLAG(int, torch_threads, 2, "LibTorch intra-op threads");
ABSL_FLAG(int, env_threads, 1, "environment threads");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  torch::set_num_threads(absl::GetFlag(FLAGS_torch_threads));
  auto spec = rl::LoadRunSpecFile(absl::GetFlag(FLAGS_run));
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  spec->set_total_env_steps(absl::GetFlag(FLAGS_steps));
  spec->clear_target_return();
  rl::TrainerOptions options;
  options.env_threads = absl::GetFlag(FLAGS_env_threads);
  auto trainer = rl::LocalTrainer::Create(*spec, options);
  if (!trainer.ok()) {
    std::fprintf(stderr, "%s\n", trainer.status().ToString().c_str());
    return 1;
  }
  auto result = (*trainer)->Train();
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
    return 1;
  }
  const rl::TimeBreakdown& t = result->time;
  const double total = t.env + t.inference + t.gae + t.update + t.other;
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const double peak_mib = usage.ru_maxrss / 1024.0;
  std::printf(
      "run file            %s (%d envs x %d steps, %d epochs x %d "
      "minibatches)\n",
      absl::GetFlag(FLAGS_run).c_str(), spec->envs_per_actor(),
      spec->segment_length(), spec->ppo().num_epochs(),
      spec->ppo().num_minibatches());
  std::printf("threads             torch %d, env %d\n",
              absl::GetFlag(FLAGS_torch_threads),
              absl::GetFlag(FLAGS_env_threads));
  std::printf("env steps           %lld in %.2f s\n",
              static_cast<long long>(result->progress.env_steps),
              result->progress.seconds);
  std::printf("mean return (100)   %.1f (the run still learns at this speed)\n",
              result->progress.mean_return);
  std::printf("throughput          %.0f env steps/s  (goal >= 100000: %.2fx)\n",
              result->progress.steps_per_second,
              result->progress.steps_per_second / 100000.0);
  std::printf(
      "time fractions      env %.3f | inference %.3f | GAE %.3f | "
      "update %.3f | other %.3f\n",
      t.env / total, t.inference / total, t.gae / total, t.update / total,
      t.other / total);
  std::printf("peak memory (RSS)   %.0f MiB  (goal <= 1024 MiB: %.2fx)\n",
              peak_mib, peak_mib / 1024.0);
  return 0;
}
