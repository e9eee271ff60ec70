// Two threads opening the bridge at once, as two trainers of one process do
// (rl_local sweep with concurrency > 1, a learning test's seeds): the first
// opens start the embedded Python from either thread. pybind11 2.10 set up
// its internals on the first GIL acquire and kept a freed thread state when
// that was not the starting thread, and about half of such starts crashed
// (SIGSEGV). Each start runs in a forked child, so every one is a first.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

// Opens tic-tac-toe (a turn-based PettingZoo game, 2 agents) and plays 200
// steps of allowed random moves; 0 when every call succeeded.
int OpenAndPlay(int seed) {
  EnvSpec spec;
  spec.set_id("tictactoe_aec:env");
  spec.set_plugin("envs/gym_bridge/libgym_bridge.so");
  spec.set_observation_size(19);
  spec.set_num_discrete_actions(9);
  spec.set_agents_per_env(2);
  spec.set_action_mask(true);
  if (!ResolveEnvSpec(&spec).ok()) return 1;
  EnvOpenOptions options;
  options.num_envs = 8;
  options.seed = seed;
  options.search_path = std::vector<std::string>{};
  auto env = OpenEnv(spec, options);
  if (!env.ok()) {
    std::fprintf(stderr, "open: %s\n", env.status().ToString().c_str());
    return 2;
  }
  const int n = options.num_envs;
  std::vector<float> obs(n * 19), final_obs(n * 19), rewards(n), returns(n);
  std::vector<uint8_t> term(n), trunc(n), masks(n * 9);
  std::vector<int32_t> lengths(n);
  std::vector<int64_t> actions(n);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  out.action_masks = masks.data();
  if (!(*env)->Reset(obs.data(), masks.data()).ok()) return 3;
  std::mt19937 rng(seed);
  for (int t = 0; t < 200; ++t) {
    for (int row = 0; row < n; ++row) {
      std::vector<int64_t> allowed;
      for (int k = 0; k < 9; ++k) {
        if (masks[row * 9 + k]) allowed.push_back(k);
      }
      actions[row] = allowed[rng() % allowed.size()];
    }
    const absl::Status status = (*env)->StepDiscrete(actions.data(), out);
    if (!status.ok()) {
      std::fprintf(stderr, "step: %s\n", status.ToString().c_str());
      return 4;
    }
  }
  return 0;
}

TEST(GymBridgeThreadsTest, TwoThreadsStartingThePythonAtOnceBothPlay) {
  setenv("PYTHONPATH", "examples/gym_env", 1);
  setenv("RL_PYTHON_ENV_MODULES", "tictactoe_aec", 1);
  for (int start = 0; start < 12; ++start) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int results[2] = {-1, -1};
      std::thread a([&] { results[0] = OpenAndPlay(1); });
      std::thread b([&] { results[1] = OpenAndPlay(2); });
      a.join();
      b.join();
      _exit(results[0] != 0   ? 10 + results[0]
            : results[1] != 0 ? 20 + results[1]
                              : 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status))
        << "start " << start << ": killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "start " << start;
  }
}

}  // namespace
}  // namespace rl
