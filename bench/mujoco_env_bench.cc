// MuJoCo envs, env-only: steps/s of each v5 environment through the plugin
// (`plugin: mujoco` opened as an actor opens it: the ABI and the service's
// checks, random actions in bounds) on 1 and 2 threads, beside
//   - the ceiling: mj_step x frame_skip alone on the same model, one mjData
//     per env, the same threads (no observation, reward or reset);
//   - EnvPool 1.2.5's same id (a Python child, when a bench venv has it:
//     tools/bench_venv.sh makes .bench-venv; --envpool_python=PATH).
// Goals (issue 29): >= 1.0x EnvPool per thread, >= 0.9 of the ceiling.
//
//   bazel run --config=opt //bench:mujoco_env_bench [-- --envs=Hopper-v5
//       --num_envs=16 --seconds=2 --threads=1,2]
#include <mujoco/mujoco.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_files.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "envs/mujoco/mujoco_task.h"

ABSL_FLAG(std::string, envs, "",
          "Comma-separated ids (default: every MuJoCo v5 environment).");
ABSL_FLAG(int, num_envs, 16, "Environments per batch.");
ABSL_FLAG(double, seconds, 2.0, "Seconds per measurement.");
ABSL_FLAG(std::string, threads, "1,2", "Thread counts to measure.");
ABSL_FLAG(std::string, envpool_python, ".bench-venv/bin/python",
          "A python with envpool==1.2.5 (tools/bench_venv.sh); empty or "
          "missing: no EnvPool column.");

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Env steps/s of the plugin as an actor steps it.
double ThroughThePlugin(const std::string& id, int num_envs, int threads,
                        double seconds) {
  const std::unique_ptr<mujoco_envs::MujocoTask> task =
      mujoco_envs::MakeMujocoTask(id, rlenv::Kwargs("{}"));
  const mjModel* m = task->model();
  EnvSpec spec;
  spec.set_id(id);
  spec.set_plugin(BenchFilePath("envs/mujoco/libmujoco_envs.so"));
  spec.set_observation_size(task->observation_size());
  spec.set_continuous_action_size(m->nu);
  spec.set_action_low(m->actuator_ctrlrange[0]);
  spec.set_action_high(m->actuator_ctrlrange[1]);
  spec.set_max_episode_steps(task->default_max_episode_steps());
  if (const absl::Status s = ResolveEnvSpec(&spec); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", id.c_str(), s.ToString().c_str());
    return 0;
  }
  EnvOpenOptions options;
  options.num_envs = num_envs;
  options.seed = 1;
  options.num_threads = threads;
  auto env = OpenEnv(spec, options);
  if (!env.ok()) {
    std::fprintf(stderr, "%s: %s\n", id.c_str(),
                 env.status().ToString().c_str());
    return 0;
  }
  const int n = num_envs, obs_size = task->observation_size(), nu = m->nu;
  std::vector<float> obs(n * obs_size), final_obs(n * obs_size), rewards(n),
      returns(n);
  std::vector<uint8_t> term(n), trunc(n);
  std::vector<int32_t> lengths(n);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  // 64 batches of random actions, drawn before timing.
  std::mt19937_64 rng(1);
  std::vector<std::vector<float>> actions(64, std::vector<float>(n * nu));
  for (auto& batch : actions) {
    for (int i = 0; i < n * nu; ++i) {
      const int k = i % nu;
      batch[i] = std::uniform_real_distribution<float>(
          m->actuator_ctrlrange[2 * k], m->actuator_ctrlrange[2 * k + 1])(rng);
    }
  }
  if (!(*env)->Reset(obs.data()).ok()) return 0;
  int64_t step = 0;
  auto run = [&](int count) {
    for (int k = 0; k < count; ++k, ++step) {
      if (!(*env)->StepContinuous(actions[step % 64].data(), out).ok()) {
        std::abort();
      }
    }
  };
  run(20);
  const auto start = Clock::now();
  int64_t steps = 0;
  while (Since(start) < seconds) {
    run(20);
    steps += 20 * n;
  }
  return steps / Since(start);
}

// Env steps/s of mj_step x frame_skip alone: `threads` threads, each with
// its share of `num_envs` mjData, random controls, nothing else.
double Ceiling(const std::string& id, int num_envs, int threads,
               double seconds) {
  const std::unique_ptr<mujoco_envs::MujocoTask> task =
      mujoco_envs::MakeMujocoTask(id, rlenv::Kwargs("{}"));
  const mjModel* m = task->model();
  std::atomic<int64_t> total{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const int begin = num_envs * t / threads;
      const int end = num_envs * (t + 1) / threads;
      std::vector<mjData*> data;
      mujoco_envs::Rng rng(t + 1);
      for (int i = begin; i < end; ++i) {
        data.push_back(mj_makeData(m));
        task->Reset(data.back(), rng);
      }
      int64_t steps = 0;
      const auto start = Clock::now();
      while (Since(start) < seconds) {
        for (mjData* d : data) {
          for (int k = 0; k < m->nu; ++k) {
            d->ctrl[k] = std::uniform_real_distribution<double>(
                m->actuator_ctrlrange[2 * k],
                m->actuator_ctrlrange[2 * k + 1])(rng);
          }
          for (int k = 0; k < task->frame_skip(); ++k) mj_step(m, d);
          // Keep the physics stable as episodes would end: restart a
          // state that left the healthy range long ago.
          if (d->time > 1000 * task->dt()) task->Reset(d, rng);
        }
        steps += static_cast<int64_t>(data.size());
      }
      total += static_cast<int64_t>(steps / Since(start));
      for (mjData* d : data) mj_deleteData(d);
    });
  }
  for (std::thread& w : workers) w.join();
  return static_cast<double>(total.load());
}

// Env steps/s of EnvPool's same id, from a Python child; 0 when it cannot
// run.
double EnvPool(const std::string& python, const std::string& id, int num_envs,
               int threads, double seconds) {
  if (python.empty() || access(python.c_str(), X_OK) != 0) return 0;
  const std::string script = absl::StrCat(
      "import time, numpy as np, envpool\n"
      "env = envpool.make('",
      id, "', env_type='gymnasium', num_envs=", num_envs,
      ", batch_size=", num_envs, ", num_threads=", threads,
      ", seed=1)\n"
      "env.reset(); sp = env.action_space; rng = np.random.default_rng(1)\n"
      "acts = [rng.uniform(sp.low, sp.high, (",
      num_envs,
      ",) + sp.shape).astype(np.float32) for _ in range(64)]\n"
      "for k in range(20): env.step(acts[k % 64])\n"
      "n = 0; k = 0; start = time.perf_counter()\n"
      "while time.perf_counter() - start < ",
      seconds,
      ":\n"
      "    for _ in range(20): env.step(acts[k % 64]); k += 1\n"
      "    n += 20 * ",
      num_envs,
      "\n"
      "print(n / (time.perf_counter() - start))\n");
  return PythonNumber(python, script);
}

std::string Ratio(double a, double b) {
  return b > 0 ? absl::StrFormat("%.2fx", a / b) : "-";
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::vector<std::string> ids = mujoco_envs::MujocoTaskIds();
  if (!absl::GetFlag(FLAGS_envs).empty()) {
    ids = absl::StrSplit(absl::GetFlag(FLAGS_envs), ',', absl::SkipEmpty());
  }
  std::vector<int> threads;
  for (absl::string_view t :
       absl::StrSplit(absl::GetFlag(FLAGS_threads), ',', absl::SkipEmpty())) {
    threads.push_back(std::max(1, std::atoi(std::string(t).c_str())));
  }
  const int n = absl::GetFlag(FLAGS_num_envs);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  std::string python = absl::GetFlag(FLAGS_envpool_python);
  if (!python.empty()) python = BenchFilePath(python);
  const bool envpool = !python.empty() && access(python.c_str(), X_OK) == 0;
  std::printf(
      "MuJoCo v5 env-only steps/s, %d envs, random actions, %.1f s each%s\n", n,
      seconds,
      envpool ? absl::StrCat(", EnvPool from ", python).c_str()
              : " (no EnvPool: run tools/bench_venv.sh)");
  std::printf("%-26s %7s %12s %12s %12s %10s %10s\n", "env", "threads",
              "plugin", "mj_step", "EnvPool", "/ceiling", "/EnvPool");
  for (const std::string& id : ids) {
    for (const int t : threads) {
      const double ours = ThroughThePlugin(id, n, t, seconds);
      const double ceiling = Ceiling(id, n, t, seconds);
      const double pool = envpool ? EnvPool(python, id, n, t, seconds) : 0;
      std::printf(
          "%-26s %7d %12.0f %12.0f %12s %10s %10s\n", id.c_str(), t, ours,
          ceiling,
          pool > 0 ? absl::StrCat(static_cast<int64_t>(pool)).c_str() : "-",
          Ratio(ours, ceiling).c_str(), Ratio(ours, pool).c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) { return rl::Main(argc, argv); }
