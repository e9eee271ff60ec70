// Atari frames/s with CleanRL's preprocessing, as an actor steps it (the
// plugin ABI, the service's checks, random actions from C++): the native
// plugin (plugin: atari, envs/atari) and the Gymnasium bridge
// (rl_atari:<Game>-v5), beside EnvPool 1.2.5's same game with the same
// preprocessing (episodic_life, reward_clip, 84x84 grey, 4 stacked, frame
// skip 4, no-op reset 30, sticky actions off) on 1 and 2 threads, and ALE's
// emulation alone (one thread, no preprocessing: the ceiling). Frames are
// env steps x 4 (frame skip). The native plugin runs its batch on 1 and 2
// shard threads; the bridge runs sync (one core) and async (Gymnasium's
// AsyncVectorEnv, a worker process per env, every core); rl_atari's
// vector env alone in Python is the bridge's own ceiling.
//
//   tools/bench_venv.sh   # once: .bench-venv with EnvPool (optional column)
//   bazel run --config=opt //bench:atari_env_bench [-- --games=Breakout,Pong
//       --num_envs=8 --seconds=5]
//   (on 2 cores the 2-thread columns are only fair on an idle machine)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ale/ale_interface.hpp"
#include "ale_rom_dir.h"
#include "bench/bench_files.h"
#include "envs/atari/atari_game.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"

ABSL_FLAG(std::string, games, "Breakout,Pong", "ALE games, comma separated.");
ABSL_FLAG(int, num_envs, 8, "Environments per vector env (CleanRL: 8).");
ABSL_FLAG(double, seconds, 5, "Seconds per measurement.");
ABSL_FLAG(int, rounds, 0,
          "> 0: instead of the table, that many alternated rounds of ALE "
          "alone, native and EnvPool on one thread per game, each round's "
          "ratios and their medians (a noisy machine's figures).");
ABSL_FLAG(std::string, envpool_python, ".bench-venv/bin/python",
          "A python with envpool==1.2.5 (tools/bench_venv.sh); empty or "
          "missing: no EnvPool column.");

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

// Actions of `game` (CleanRL's minimal action sets).
int Choices(const std::string& game) { return game == "Pong" ? 6 : 4; }

// The number a Python child prints; 0 when it cannot run. `setup` makes
// `env` of `n` envs with `choices` actions.
double RunPython(const std::string& python, const std::string& setup,
                 const std::string& step, double seconds) {
  const std::string script =
      absl::StrCat("import time, numpy as np\n", setup,
                   "\nrng = np.random.default_rng(1)\n"
                   "acts = [rng.integers(0, choices, n) for _ in range(64)]\n"
                   "for k in range(20): ",
                   step,
                   "\n"
                   "steps = 0; k = 0; start = time.perf_counter()\n"
                   "while time.perf_counter() - start < ",
                   seconds,
                   ":\n"
                   "    for _ in range(20): ",
                   step,
                   "; k += 1\n"
                   "    steps += 20 * n\n"
                   "print(steps / (time.perf_counter() - start))\n");
  return PythonNumber(python, script);
}

// rl_atari's vector env stepped alone in Python (no bridge).
double PythonAlone(const std::string& python, const std::string& game, int n,
                   double seconds) {
  const std::string module = BenchFilePath("envs/gym_bridge/rl_atari.py");
  const std::string setup = absl::StrCat(
      "import sys; sys.path.insert(0, '", module.substr(0, module.rfind('/')),
      "')\nimport gymnasium as gym, rl_atari\n"
      "n = ",
      n, "; choices = ", Choices(game), "\nenv = gym.make_vec('", game,
      "-v5', num_envs=n, vectorization_mode='sync', vector_kwargs={"
      "'autoreset_mode': gym.vector.AutoresetMode.SAME_STEP})\n"
      "env.reset(seed=1)");
  return RunPython(python, setup, "env.step(acts[k % 64])", seconds);
}

// EnvPool's same game, preprocessed as rl_atari does.
double EnvPool(const std::string& python, const std::string& game, int n,
               int threads, double seconds) {
  if (python.empty() || access(python.c_str(), X_OK) != 0) return 0;
  const std::string setup = absl::StrCat(
      "import envpool\nn = ", n, "; choices = ", Choices(game),
      "\nenv = envpool.make('", game,
      "-v5', env_type='gymnasium', num_envs=n, batch_size=n, num_threads=",
      threads,
      ", seed=1, episodic_life=True, reward_clip=True, "
      "repeat_action_probability=0)\n"
      "env.reset()");
  return RunPython(python, setup, "env.step(acts[k % 64])", seconds);
}

// ALE alone: `game` stepped frame by frame with random actions of its
// minimal set, reset when a game ends; frames/s / 4 (as env steps).
double AleAlone(const std::string& game, double seconds) {
  ale::Logger::setMode(ale::Logger::Error);
  ale::ALEInterface ale;
  ale.setInt("random_seed", 1);
  ale.setFloat("repeat_action_probability", 0.0f);
  ale.loadROM(std::string(RL_ALE_ROM_DIR) + "/" + atari::RomName(game) +
              ".bin");
  const ale::ActionVect actions = ale.getMinimalActionSet();
  std::mt19937_64 rng(1);
  int64_t frames = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int k = 0; k < 1000; ++k) {
      ale.act(actions[rng() % actions.size()]);
      if (ale.game_over()) ale.reset_game();
    }
    frames += 1000;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return frames / elapsed / 4;
}

// Env steps/s of `game` through the plugin ABI: the native plugin
// (`async` unused) on `threads` shard threads, or the bridge, sync or
// async.
double Stepped(const std::string& game, bool native, int n, int threads,
               bool async, double seconds) {
  EnvSpec spec;
  if (native) {
    spec.set_id(absl::StrCat(game, "-v5"));
    spec.set_plugin(BenchFilePath("envs/atari/libatari_envs.so"));
  } else {
    spec.set_id(absl::StrCat("rl_atari:", game, "-v5"));
    spec.set_plugin(BenchFilePath("envs/gym_bridge/libgym_bridge.so"));
  }
  for (const int d : {4, 84, 84}) spec.add_observation_shape(d);
  spec.set_observation_dtype("uint8");
  spec.set_num_discrete_actions(Choices(game));
  spec.set_reward_low(-1);
  spec.set_reward_high(1);
  spec.set_episodic_life(true);
  if (async) {
    (*spec.mutable_kwargs()->mutable_fields())["vectorization_mode"]
        .set_string_value("async");
  }
  if (absl::Status s = ResolveEnvSpec(&spec); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 0;
  }
  EnvOpenOptions options;
  options.num_envs = n;
  options.seed = 1;
  options.num_threads = threads;
  auto env = OpenEnv(spec, options);
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().ToString().c_str());
    return 0;
  }
  const int64_t frame = 4 * 84 * 84;
  std::vector<uint8_t> obs(n * frame), final_obs(n * frame), term(n), trunc(n);
  std::vector<float> rewards(n), returns(n);
  std::vector<int32_t> lengths(n);
  std::vector<int64_t> actions(n);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  if (!(*env)->Reset(obs.data()).ok()) return 0;
  std::mt19937_64 rng(1);
  const int64_t choices = spec.num_discrete_actions();
  auto step = [&] {
    for (int64_t& a : actions) a = static_cast<int64_t>(rng() % choices);
    if (absl::Status s = (*env)->StepDiscrete(actions.data(), out); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::abort();
    }
  };
  for (int k = 0; k < 20; ++k) step();
  int64_t steps = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int k = 0; k < 20; ++k) step();
    steps += 20 * n;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return steps / elapsed;
}

std::string Ratio(double a, double b) {
  return b > 0 ? absl::StrFormat("%.2fx", a / b) : "-";
}

std::string Frames(double steps_per_second) {
  return steps_per_second > 0
             ? absl::StrCat(static_cast<int64_t>(4 * steps_per_second))
             : "-";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// --rounds: ALE alone, native and EnvPool on one thread, alternated, so
// that a noisy machine's drift falls on all three of a round alike.
void Rounds(const std::vector<std::string>& games, const std::string& pool,
            int n, int rounds, double seconds) {
  std::printf("%-9s %5s %8s %8s %8s %9s %8s %9s\n", "game", "round", "ALE",
              "native", "EnvPool", "native/EP", "/ALE", "EP/ALE");
  for (const std::string& game : games) {
    std::vector<double> to_pool, to_ale, pool_to_ale;
    for (int r = 0; r < rounds; ++r) {
      const double ale = AleAlone(game, seconds);
      const double native = Stepped(game, true, n, 1, false, seconds);
      const double pool1 = EnvPool(pool, game, n, 1, seconds);
      to_pool.push_back(pool1 > 0 ? native / pool1 : 0);
      to_ale.push_back(native / ale);
      pool_to_ale.push_back(pool1 / ale);
      std::printf("%-9s %5d %8s %8s %8s %9s %8s %9s\n", game.c_str(), r + 1,
                  Frames(ale).c_str(), Frames(native).c_str(),
                  Frames(pool1).c_str(), Ratio(native, pool1).c_str(),
                  Ratio(native, ale).c_str(), Ratio(pool1, ale).c_str());
      std::fflush(stdout);
    }
    std::printf("%-9s %5s %8s %8s %8s %8.2fx %7.2fx %8.2fx\n", game.c_str(),
                "median", "", "", "", Median(to_pool), Median(to_ale),
                Median(pool_to_ale));
  }
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_num_envs);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const std::string python = BenchPython();
  std::string pool = absl::GetFlag(FLAGS_envpool_python);
  if (!pool.empty()) pool = BenchFilePath(pool);
  std::printf(
      "Atari frames/s (env steps x 4), CleanRL's preprocessing, %d envs, "
      "random actions, %.1f s each%s\n",
      n, seconds,
      access(pool.c_str(), X_OK) == 0
          ? absl::StrCat(", EnvPool from ", pool).c_str()
          : " (no EnvPool: run tools/bench_venv.sh)");
  const std::vector<std::string> games =
      absl::StrSplit(absl::GetFlag(FLAGS_games), ',', absl::SkipEmpty());
  if (absl::GetFlag(FLAGS_rounds) > 0) {
    Rounds(games, pool, n, absl::GetFlag(FLAGS_rounds), seconds);
    return 0;
  }
  std::printf(
      "%-9s %8s | %8s %8s %8s %9s %8s %9s | %8s %8s %9s %8s %9s | %8s %8s\n",
      "game", "ALE", "native", "bridge", "EnvPool", "native/EP", "/ALE",
      "bridge/EP", "native", "async", "EnvPool", "native/EP", "async/EP",
      "Python", "bridge/Py");
  std::printf("%-9s %8s | %46s %9s | %44s | %17s\n", "", "1 thread", "1 thread",
              "", "2 threads", "bridge's own ceiling");
  for (const std::string& game : games) {
    const double ale = AleAlone(game, seconds);
    const double native1 = Stepped(game, true, n, 1, false, seconds);
    const double bridge = Stepped(game, false, n, 1, false, seconds);
    const double pool1 = EnvPool(pool, game, n, 1, seconds);
    const double native2 = Stepped(game, true, n, 2, false, seconds);
    const double async = Stepped(game, false, n, 1, true, seconds);
    const double pool2 = EnvPool(pool, game, n, 2, seconds);
    const double alone = PythonAlone(python, game, n, seconds);
    std::printf(
        "%-9s %8s | %8s %8s %8s %9s %8s %9s | %8s %8s %9s %8s %9s | %8s "
        "%8s\n",
        game.c_str(), Frames(ale).c_str(), Frames(native1).c_str(),
        Frames(bridge).c_str(), Frames(pool1).c_str(),
        Ratio(native1, pool1).c_str(), Ratio(native1, ale).c_str(),
        Ratio(bridge, pool1).c_str(), Frames(native2).c_str(),
        Frames(async).c_str(), Frames(pool2).c_str(),
        Ratio(native2, pool2).c_str(), Ratio(async, pool2).c_str(),
        Frames(alone).c_str(), Ratio(bridge, alone).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) { return rl::Main(argc, argv); }
