// The cost of the plugin path, on CartPole-v1 (one thread, E environments,
// random actions, into a rollout laid out [T, E, ...]):
//   direct   - the classic-control batch called directly (BatchedEnv::Create,
//              what actors stepped before environments went through the ABI)
//   built-in - OpenEnv of the built-in CartPole: the built-in table through
//              the plugin ABI, with the service's checks of every step
//              (finite observations and rewards, flags) - today's path
//   plugin   - OpenEnv of the same physics built as a shared library
//              (bench/cartpole_plugin.cc), loaded with dlopen
// Prints env steps/s of each and the ratios plugin/built-in (goal >= 0.95)
// and built-in/direct.
//
//   bazel run --config=opt //bench:plugin_env_bench [-- E T SECONDS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "bench/bench_files.h"
#include "envs/batched_env.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

struct Rollout {
  Rollout(int num_envs, int steps)
      : obs(static_cast<size_t>(steps + 1) * num_envs * 4),
        final_obs(obs.size()),
        rewards(static_cast<size_t>(steps) * num_envs),
        terminated(rewards.size()),
        truncated(rewards.size()),
        returns(rewards.size()),
        lengths(rewards.size()),
        actions(rewards.size()) {}
  std::vector<float> obs, final_obs, rewards;
  std::vector<uint8_t> terminated, truncated;
  std::vector<float> returns;
  std::vector<int32_t> lengths;
  std::vector<int64_t> actions;
};

// Env steps per second of `env` over `seconds`, in rollouts of T steps.
double Measure(BatchedEnv& env, int num_envs, int steps, double seconds) {
  Rollout r(num_envs, steps);
  std::mt19937_64 rng(5);
  for (int64_t& a : r.actions) a = static_cast<int64_t>(rng() & 1);
  if (!env.Reset(r.obs.data()).ok()) std::abort();
  auto run_segment = [&] {
    for (int t = 0; t < steps; ++t) {
      const size_t row = static_cast<size_t>(t) * num_envs;
      StepOutputs out;
      out.observations = r.obs.data() + (row + num_envs) * 4;
      out.final_observations = r.final_obs.data() + row * 4;
      out.rewards = r.rewards.data() + row;
      out.terminated = r.terminated.data() + row;
      out.truncated = r.truncated.data() + row;
      out.episode_returns = r.returns.data() + row;
      out.episode_lengths = r.lengths.data() + row;
      if (!env.StepDiscrete(r.actions.data() + row, out).ok()) std::abort();
    }
  };
  run_segment();  // warm up
  int64_t env_steps = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    run_segment();
    env_steps += static_cast<int64_t>(steps) * num_envs;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return env_steps / elapsed;
}

int Main(int argc, char** argv) {
  const int num_envs = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 64;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 2.0;
  EnvSpec spec;
  spec.set_id("CartPole-v1");
  if (!ResolveEnvSpec(&spec).ok()) return 1;
  EnvOpenOptions options;
  options.num_envs = num_envs;
  options.seed = 1;
  auto direct = BatchedEnv::Create("CartPole-v1", num_envs, 1);
  auto builtin = OpenEnv(spec, options);
  EnvSpec plugin_spec = spec;
  plugin_spec.set_plugin(BenchFilePath("bench/libcartpole_plugin.so"));
  plugin_spec.clear_max_episode_steps();
  plugin_spec.set_max_episode_steps(500);
  if (!ResolveEnvSpec(&plugin_spec).ok()) return 1;
  auto plugin = OpenEnv(plugin_spec, options);
  for (const auto* s :
       {&direct.status(), &builtin.status(), &plugin.status()}) {
    if (!s->ok()) {
      std::fprintf(stderr, "%s\n", s->ToString().c_str());
      return 1;
    }
  }
  std::printf(
      "CartPole-v1, %d environments x %d steps per segment, one "
      "thread, %.1f s each (interleaved, best of 3)\n",
      num_envs, steps, seconds);
  double best[3] = {0, 0, 0};
  BatchedEnv* envs[3] = {direct->get(), builtin->get(), plugin->get()};
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 3; ++k) {
      best[k] = std::max(best[k], Measure(*envs[k], num_envs, steps, seconds));
    }
  }
  std::printf("  direct   (classic-control batch)  %12.0f env steps/s\n",
              best[0]);
  std::printf("  built-in (through the plugin ABI)  %12.0f env steps/s\n",
              best[1]);
  std::printf("  plugin   (same physics, dlopen)    %12.0f env steps/s\n",
              best[2]);
  std::printf("plugin / built-in: %.2fx (goal >= 0.95x)\n", best[2] / best[1]);
  std::printf("built-in / direct: %.2fx (the ABI's checks and calls)\n",
              best[1] / best[0]);
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) { return rl::Main(argc, argv); }
