// The Gymnasium bridge's overhead: a Gymnasium vector env stepped through
// the bridge (as an actor steps it: the plugin ABI, the service's checks,
// random actions from C++) vs gymnasium.make_vec stepping alone in a Python
// process with random actions (numpy), for the same env, E and seconds.
// Goal: bridge / alone >= 0.8. Needs the venv's gymnasium (RL_PYTHON, or
// .venv/bin/python3 of the workspace).
//
//   bazel run --config=opt //bench:gym_bridge_bench [-- ENV_ID E SECONDS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_files.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

// Steps/s of make_vec alone, from a Python child process.
double PythonAlone(const std::string& python, const std::string& id,
                   int num_envs, double seconds) {
  const std::string script = absl::StrCat(
      "import time, numpy as np, gymnasium as gym\n"
      "env = gym.make_vec('",
      id, "', num_envs=", num_envs,
      ", vectorization_mode='sync', vector_kwargs={'autoreset_mode': "
      "gym.vector.AutoresetMode.SAME_STEP})\n"
      "env.reset(seed=1); rng = np.random.default_rng(1); n = 0\n"
      "for _ in range(100): env.step(rng.integers(0, 2, ",
      num_envs,
      "))\n"
      "start = time.perf_counter()\n"
      "while time.perf_counter() - start < ",
      seconds,
      ":\n"
      "    for _ in range(100): env.step(rng.integers(0, 2, ",
      num_envs,
      "))\n"
      "    n += 100 * ",
      num_envs,
      "\n"
      "print(n / (time.perf_counter() - start))\n");
  return PythonNumber(python, script);
}

double ThroughTheBridge(const std::string& id, int num_envs, double seconds) {
  EnvSpec spec;
  spec.set_id(id);
  spec.set_plugin(BenchFilePath("envs/gym_bridge/libgym_bridge.so"));
  spec.set_observation_size(4);
  spec.set_num_discrete_actions(2);
  if (!ResolveEnvSpec(&spec).ok()) return 0;
  EnvOpenOptions options;
  options.num_envs = num_envs;
  options.seed = 1;
  auto env = OpenEnv(spec, options);
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().ToString().c_str());
    return 0;
  }
  const int n = num_envs;
  std::vector<float> obs(n * 4), final_obs(n * 4), rewards(n), returns(n);
  std::vector<uint8_t> term(n), trunc(n);
  std::vector<int32_t> lengths(n);
  std::vector<int64_t> actions(n);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  if (!(*env)->Reset(obs.data()).ok()) return 0;
  std::mt19937_64 rng(1);
  auto step = [&] {
    for (int64_t& a : actions) a = static_cast<int64_t>(rng() & 1);
    if (!(*env)->StepDiscrete(actions.data(), out).ok()) std::abort();
  };
  for (int k = 0; k < 100; ++k) step();
  int64_t steps = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int k = 0; k < 100; ++k) step();
    steps += 100 * n;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return steps / elapsed;
}

int Main(int argc, char** argv) {
  const std::string id = argc > 1 ? argv[1] : "CartPole-v1";
  const double seconds = argc > 3 ? std::atof(argv[3]) : 3.0;
  std::vector<int> sizes = {16, 256};
  if (argc > 2) sizes = {std::atoi(argv[2])};
  const std::string python = BenchPython();
  std::printf(
      "%s, random actions, sync vector env, %.0f s each (best of 2 "
      "alternated rounds)\n",
      id.c_str(), seconds);
  for (const int n : sizes) {
    double bridge = 0, alone = 0;
    for (int round = 0; round < 2; ++round) {
      alone = std::max(alone, PythonAlone(python, id, n, seconds));
      bridge = std::max(bridge, ThroughTheBridge(id, n, seconds));
    }
    std::printf(
        "  E=%-4d make_vec alone %10.0f env steps/s, through the "
        "bridge %10.0f: %.2fx (goal >= 0.8x)\n",
        n, alone, bridge, alone > 0 ? bridge / alone : 0);
  }
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) { return rl::Main(argc, argv); }
