// The fused CPU path against eager LibTorch on the same run file, in one
// process, legs alternated over rounds, next to the arithmetic limit of the
// run's shapes on this machine:
//
//   bazel run --config=opt //bench:cpu_kernels_bench --
//       [--run=bench/cartpole_cleanrl.yaml] [--steps=200000] [--rounds=3]
//
// (or bazel-bin/bench/cpu_kernels_bench: a relative --run is found as
// bench/bench_files.h says)
//
// The limit: the multiply-adds of one env step (one forward pass for
// inference, and per epoch one forward and one backward pass of the update:
// about 3x the forward) divided by the rate this machine's BLAS reaches on
// the update's largest product, measured here on one thread. It is what a
// trainer that did nothing but those products would reach.
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_files.h"
#include "common/status.h"
#include "envs/batched_env.h"
#include "runspec/run_spec.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, run, "bench/cartpole_cleanrl.yaml", "run file");
ABSL_FLAG(int64_t, steps, 200000, "environment steps per leg");
ABSL_FLAG(int, rounds, 3, "rounds of (fused, libtorch)");
ABSL_FLAG(int, torch_threads, 1,
          "LibTorch intra-op threads (rl_local's default is 1)");

namespace rl {
namespace {

struct Leg {
  double steps_per_second = 0;
  TimeBreakdown time;
};

absl::StatusOr<Leg> Train(RunSpec spec, const std::string& kernels) {
  spec.mutable_execution()->set_cpu_kernels(kernels);
  ASSIGN_OR_RETURN(auto trainer, LocalTrainer::Create(spec, TrainerOptions()));
  ASSIGN_OR_RETURN(TrainResult result, trainer->Train());
  return Leg{result.progress.steps_per_second, result.time};
}

// Multiply-adds of one forward pass of one row.
double ForwardFlops(const RunSpec& spec, int observation_size, int head) {
  double flops = 0;
  const int trunks = spec.policy().shared_trunk() ? 1 : 2;
  int in = observation_size;
  for (int h : spec.policy().hidden_sizes()) {
    flops += 2.0 * in * h * trunks;
    in = h;
  }
  return flops + 2.0 * in * (head + 1);
}

// GFLOP/s of [rows, h] x [h, h] on one thread (the update's biggest
// product), through LibTorch's BLAS.
double GemmRate(int64_t rows, int64_t h) {
  torch::NoGradGuard no_grad;
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const torch::Tensor a = torch::randn({rows, h});
  const torch::Tensor b = torch::randn({h, h});
  torch::Tensor c = torch::empty({rows, h});
  const int64_t reps = std::max<int64_t>(20, 50000000 / (rows * h * h));
  for (int i = 0; i < 10; ++i) torch::mm_out(c, a, b);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < reps; ++i) torch::mm_out(c, a, b);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  torch::set_num_threads(threads);
  return 2.0 * rows * h * h * reps / seconds / 1e9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  auto spec = LoadRunSpecFile(BenchFilePath(absl::GetFlag(FLAGS_run)));
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 2;
  }
  spec->set_total_env_steps(absl::GetFlag(FLAGS_steps));
  spec->clear_target_return();
  const PPOConfig& ppo = spec->ppo();
  const int64_t batch =
      static_cast<int64_t>(spec->envs_per_actor()) * spec->segment_length();
  const int64_t minibatch = batch / ppo.num_minibatches();
  std::printf(
      "run file      %s: %d envs x %d steps, %d epochs x %d "
      "minibatches of %lld, hidden",
      absl::GetFlag(FLAGS_run).c_str(), spec->envs_per_actor(),
      spec->segment_length(), ppo.num_epochs(), ppo.num_minibatches(),
      static_cast<long long>(minibatch));
  for (int h : spec->policy().hidden_sizes()) std::printf(" %d", h);
  std::printf(", torch threads %d\n", torch::get_num_threads());

  std::vector<double> fused, libtorch, ratios;
  Leg last_fused, last_libtorch;
  for (int round = 1; round <= absl::GetFlag(FLAGS_rounds); ++round) {
    auto f = Train(*spec, "fused");
    auto l = Train(*spec, "libtorch");
    if (!f.ok() || !l.ok()) {
      std::fprintf(stderr, "%s\n",
                   (!f.ok() ? f.status() : l.status()).ToString().c_str());
      return 1;
    }
    fused.push_back(f->steps_per_second);
    libtorch.push_back(l->steps_per_second);
    ratios.push_back(f->steps_per_second / l->steps_per_second);
    last_fused = *f;
    last_libtorch = *l;
    std::printf(
        "round %d       fused %8.0f env steps/s | libtorch %8.0f | "
        "fused/libtorch %.2fx\n",
        round, f->steps_per_second, l->steps_per_second, ratios.back());
  }
  for (const auto& [name, leg] :
       {std::pair<const char*, Leg*>{"fused", &last_fused},
        {"libtorch", &last_libtorch}}) {
    const TimeBreakdown& t = leg->time;
    const double total = t.env + t.inference + t.gae + t.update + t.other;
    std::printf(
        "%-13s time: env %.2f | inference %.2f | GAE %.2f | update "
        "%.2f | other %.2f\n",
        name, t.env / total, t.inference / total, t.gae / total,
        t.update / total, t.other / total);
  }

  // The arithmetic limit of these shapes.
  auto env = BatchedEnv::Create(spec->env().id(), 1, 1, 1, 0);
  const int obs = (*env)->spec().observation_size();
  const int head = IsDiscrete((*env)->spec())
                       ? (*env)->spec().num_discrete_actions()
                       : (*env)->spec().continuous_action_size();
  const double forward = ForwardFlops(*spec, obs, head);
  const double per_step = forward * (1 + 3.0 * ppo.num_epochs());
  const int widest = *std::max_element(spec->policy().hidden_sizes().begin(),
                                       spec->policy().hidden_sizes().end());
  const double gflops = GemmRate(minibatch, widest);
  const double limit = gflops * 1e9 / per_step;
  const double median = Median(fused);
  std::printf(
      "limit         %.0f FLOP per env step; BLAS at [%lld x %d] x "
      "[%d x %d], one thread: %.1f GFLOP/s -> %.0f env steps/s\n",
      per_step, static_cast<long long>(minibatch), widest, widest, widest,
      gflops, limit);
  std::printf(
      "median        fused %.0f env steps/s = %.2fx libtorch (%.0f), "
      "%.2f of the arithmetic limit\n",
      median, Median(ratios), Median(libtorch), median / limit);
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  torch::set_num_threads(std::max(1, absl::GetFlag(FLAGS_torch_threads)));
  return rl::Main();
}
