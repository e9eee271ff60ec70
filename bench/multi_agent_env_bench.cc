// The cost of several agents per environment (issue 50: goal >= 0.95x):
// the same rows stepped as single-agent environments and as environments
// of A agents each, through OpenEnv (the plugin ABI and the service's
// checks, as actors step them). One thread, E rows, random actions; the
// two plugins are bench/agents_plugin.cc built with 1 and with A agents,
// every row doing the same work. Also LightCycles-v0 by self-play (two
// agents) for scale.
//
//   bazel build --config=opt //bench:multi_agent_env_bench
//   bazel-bin/bench/multi_agent_env_bench [--rows=1024 --steps=64 --seconds=2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_files.h"
#include "envs/batched_env.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"

ABSL_FLAG(int, rows, 1024, "environment rows (agents) stepped together");
ABSL_FLAG(int, steps, 64, "steps per segment");
ABSL_FLAG(double, seconds, 2.0, "seconds per measurement");
ABSL_FLAG(int, rounds, 3, "interleaved rounds; the best of each is kept");

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

// Env steps (rows x steps) per second of `env`, observations of `obs`
// elements, over `seconds`.
double Measure(BatchedEnv& env, int rows, int64_t obs, int steps,
               double seconds) {
  std::vector<float> observations(rows * obs), final_obs(rows * obs);
  std::vector<float> rewards(rows), returns(rows);
  std::vector<uint8_t> terminated(rows), truncated(rows);
  std::vector<int32_t> lengths(rows);
  std::vector<int64_t> actions(static_cast<size_t>(steps) * rows);
  std::mt19937_64 rng(5);
  for (int64_t& a : actions) a = static_cast<int64_t>(rng() % 3);
  if (!env.Reset(observations.data()).ok()) std::abort();
  StepOutputs out;
  out.observations = observations.data();
  out.final_observations = final_obs.data();
  out.rewards = rewards.data();
  out.terminated = terminated.data();
  out.truncated = truncated.data();
  out.episode_returns = returns.data();
  out.episode_lengths = lengths.data();
  auto segment = [&] {
    for (int t = 0; t < steps; ++t) {
      if (!env.StepDiscrete(actions.data() + t * rows, out).ok()) std::abort();
    }
  };
  segment();  // warm up
  int64_t env_steps = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    segment();
    env_steps += static_cast<int64_t>(steps) * rows;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return env_steps / elapsed;
}

EnvSpec Spec(const std::string& id, const std::string& plugin, int64_t obs,
             int agents) {
  EnvSpec spec;
  spec.set_id(id);
  spec.set_plugin(plugin);
  spec.set_observation_size(obs);
  spec.set_num_discrete_actions(3);
  spec.set_agents_per_env(agents);
  return spec;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int rows = absl::GetFlag(FLAGS_rows);
  const int steps = absl::GetFlag(FLAGS_steps);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  constexpr int kAgents = 4;  // bench/BUILD's libagents_plugin_4.so
  if (rows < 1 || rows % (2 * kAgents) != 0) {
    std::fprintf(stderr, "--rows must be a positive multiple of %d\n",
                 2 * kAgents);
    return 2;
  }
  EnvSpec single =
      Spec("Ring-v0", BenchFilePath("bench/libagents_plugin_1.so"), 32, 0);
  EnvSpec multi = Spec("Ring-v0", BenchFilePath("bench/libagents_plugin_4.so"),
                       32, kAgents);
  EnvSpec cycles = Spec("LightCycles-v0", kLightCyclesPlugin, 450, 2);
  cycles.set_reward_low(-1);
  cycles.set_reward_high(1);
  for (EnvSpec* spec : {&single, &multi, &cycles}) {
    if (absl::Status s = ResolveEnvSpec(spec); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  EnvOpenOptions options;
  options.num_envs = rows;
  options.seed = 1;
  auto a = OpenEnv(single, options);
  auto b = OpenEnv(multi, options);
  auto c = OpenEnv(cycles, options);
  for (const auto* s : {&a.status(), &b.status(), &c.status()}) {
    if (!s->ok()) {
      std::fprintf(stderr, "%s\n", s->ToString().c_str());
      return 1;
    }
  }
  std::printf(
      "%d rows x %d steps per segment, one thread, %.1f s each "
      "(interleaved, best of %d)\n",
      rows, steps, seconds, absl::GetFlag(FLAGS_rounds));
  double best[3] = {0, 0, 0};
  BatchedEnv* envs[3] = {a->get(), b->get(), c->get()};
  const int64_t obs[3] = {32, 32, 450};
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (int k = 0; k < 3; ++k) {
      best[k] =
          std::max(best[k], Measure(*envs[k], rows, obs[k], steps, seconds));
    }
  }
  std::printf("  ring walk, 1 agent per environment   %12.0f env steps/s\n",
              best[0]);
  std::printf("  ring walk, %d agents per environment  %12.0f env steps/s\n",
              kAgents, best[1]);
  std::printf("  LightCycles-v0 self-play (2 agents)  %12.0f env steps/s\n",
              best[2]);
  std::printf("%d agents / 1 agent, same rows: %.2fx (goal >= 0.95x)\n",
              kAgents, best[1] / best[0]);
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) { return rl::Main(argc, argv); }
