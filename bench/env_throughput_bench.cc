// CartPole-v1 stepping throughput on one thread, E = 4096 environments,
// writing a rollout laid out [T, E, ...] (step t fills row block t):
//   SoA   - BatchedEnv (structure-of-arrays state, one call per step of the
//           batch, the physics loop vectorised), through its public API;
//   AoS   - one object per environment with its own Step method and its own
//           std::mt19937_64 (as EnvPool and Gymnasium hold environments),
//           the same physics function, called in a loop; and the same with
//           a virtual Step, as behind a polymorphic environment interface.
// Prints env steps/s of each and the ratio.
//
//   bazel run --config=opt //bench:env_throughput_bench [-- E T SECONDS]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "envs/batched_env.h"
#include "envs/cartpole.h"

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

struct Rollout {
  Rollout(int num_envs, int steps)
      : obs(static_cast<size_t>(steps) * num_envs * 4),
        final_obs(obs.size()),
        rewards(static_cast<size_t>(steps) * num_envs),
        terminated(rewards.size()),
        truncated(rewards.size()),
        returns(rewards.size()),
        lengths(rewards.size()) {}
  std::vector<float> obs, final_obs, rewards;
  std::vector<uint8_t> terminated, truncated;
  std::vector<float> returns;
  std::vector<int32_t> lengths;
};

// The array-of-structs baselines: the environment as an object, behind a
// polymorphic interface (as gym.Env) or called directly.
class EnvObject {
 public:
  virtual ~EnvObject() = default;
  virtual void Step(int64_t action, float* obs, float* reward,
                    uint8_t* terminated, uint8_t* truncated, float* final_obs,
                    float* episode_return, int32_t* episode_length) = 0;
};

class CartPoleObject final : public EnvObject {
 public:
  explicit CartPoleObject(uint64_t seed) : rng_(seed) { Reset(); }

  void Reset() {
    for (double& x : s_) x = uniform_(rng_);
    elapsed_ = 0;
    return_ = 0;
  }

  void Step(int64_t action, float* obs, float* reward, uint8_t* terminated,
            uint8_t* truncated, float* final_obs, float* episode_return,
            int32_t* episode_length) override {
    const StepResult r = CartPole::Step(s_, &action);
    ++elapsed_;
    return_ += r.reward;
    const bool trunc = !r.terminated && elapsed_ >= CartPole::kMaxEpisodeSteps;
    *reward = r.reward;
    *terminated = r.terminated;
    *truncated = trunc;
    *episode_return = 0;
    *episode_length = 0;
    if (r.terminated || trunc) {
      CartPole::Observe(s_, final_obs);
      *episode_return = static_cast<float>(return_);
      *episode_length = elapsed_;
      Reset();
    }
    CartPole::Observe(s_, obs);
  }

 private:
  double s_[4];
  int32_t elapsed_ = 0;
  double return_ = 0;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{-0.05, 0.05};
};

// Runs `rollout_fn` (one rollout of T steps) until `seconds` have passed;
// returns the best env steps/s of its rollouts.
template <typename F>
double Measure(int num_envs, int steps, double seconds, F&& rollout_fn) {
  rollout_fn();  // warm-up: page in the buffers
  double best = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto start = Clock::now();
    rollout_fn();
    const double dt =
        std::chrono::duration<double>(Clock::now() - start).count();
    const double rate = static_cast<double>(num_envs) * steps / dt;
    if (rate > best) best = rate;
  }
  return best;
}

int Main(int argc, char** argv) {
  const int num_envs = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 64;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 2.0;

  // Random actions, as a random policy would give (episodes of ~22 steps,
  // so auto-resets are part of the work).
  std::vector<int64_t> actions(static_cast<size_t>(steps) * num_envs);
  std::mt19937_64 rng(1);
  for (int64_t& a : actions) a = rng() & 1;

  Rollout rollout(num_envs, steps);
  auto soa = BatchedEnv::Create("CartPole-v1", num_envs, /*seed=*/1,
                                /*num_threads=*/1);
  if (!soa.ok()) {
    std::fprintf(stderr, "%s\n", soa.status().ToString().c_str());
    return 1;
  }
  BatchedEnv& env = **soa;
  if (!env.Reset(rollout.obs.data()).ok()) std::abort();
  bool ok = true;
  const double soa_rate = Measure(num_envs, steps, seconds, [&] {
    for (int t = 0; t < steps; ++t) {
      const size_t row = static_cast<size_t>(t) * num_envs;
      StepOutputs out;
      out.observations = rollout.obs.data() + row * 4;
      out.rewards = rollout.rewards.data() + row;
      out.terminated = rollout.terminated.data() + row;
      out.truncated = rollout.truncated.data() + row;
      out.final_observations = rollout.final_obs.data() + row * 4;
      out.episode_returns = rollout.returns.data() + row;
      out.episode_lengths = rollout.lengths.data() + row;
      ok &= env.StepDiscrete(actions.data() + row, out).ok();
    }
  });

  // Objects in one array, stepped through their concrete type (inlined).
  std::vector<CartPoleObject> objects;
  objects.reserve(num_envs);
  for (int i = 0; i < num_envs; ++i) objects.emplace_back(1000 + i);
  // Separately allocated objects behind the interface.
  std::vector<std::unique_ptr<EnvObject>> polymorphic;
  for (int i = 0; i < num_envs; ++i) {
    polymorphic.push_back(std::make_unique<CartPoleObject>(1000 + i));
  }
  auto aos_rollout = [&](auto&& env_at) {
    for (int t = 0; t < steps; ++t) {
      const size_t row = static_cast<size_t>(t) * num_envs;
      for (int i = 0; i < num_envs; ++i) {
        const size_t r = row + i;
        env_at(i).Step(actions[r], rollout.obs.data() + r * 4,
                       &rollout.rewards[r], &rollout.terminated[r],
                       &rollout.truncated[r], rollout.final_obs.data() + r * 4,
                       &rollout.returns[r], &rollout.lengths[r]);
      }
    }
  };
  const double aos_rate = Measure(num_envs, steps, seconds, [&] {
    aos_rollout([&](int i) -> CartPoleObject& { return objects[i]; });
  });
  const double aos_virtual_rate = Measure(num_envs, steps, seconds, [&] {
    aos_rollout([&](int i) -> EnvObject& { return *polymorphic[i]; });
  });
  if (!ok) {
    std::fprintf(stderr, "a step failed\n");
    return 1;
  }

  std::printf(
      "CartPole-v1, E=%d, T=%d steps per rollout [T, E, ...], 1 thread"
      ", best of %.0f s each\n",
      num_envs, steps, seconds);
  std::printf("%-44s %16s %8s\n", "layout", "env steps/s", "vs AoS");
  std::printf("%-44s %16.3e %7.2fx\n", "SoA BatchedEnv (vectorised loop)",
              soa_rate, soa_rate / aos_rate);
  std::printf("%-44s %16.3e %7.2fx\n",
              "AoS object array, inline Step, own mt19937", aos_rate, 1.0);
  std::printf("%-44s %16.3e %7.2fx\n",
              "AoS objects via EnvObject*, virtual Step", aos_virtual_rate,
              aos_virtual_rate / aos_rate);
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) { return rl::Main(argc, argv); }
