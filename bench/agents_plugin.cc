// A walk on a ring, built twice for multi_agent_env_bench: with
// RL_BENCH_AGENTS=1 one agent per environment (an rlenv::Env), else that
// many agents per environment (an rlenv::MultiAgentEnv holding as many
// walks). Every row does the same work either way, so the two libraries
// differ only in how the plugin path handles agents.
#include <array>
#include <cstdint>

#include "rl_env_plugin.hpp"

#ifndef RL_BENCH_AGENTS
#error "build with -DRL_BENCH_AGENTS=N"
#endif

namespace {

constexpr int kCells = 32;
constexpr int kSteps = 100;  // an episode's length

// One walker: position p on a ring of kCells, observed as a one-hot;
// actions move it -1, 0 or +1; +1 reward at cell 0.
struct Walk {
  int cell = 0;
  int steps = 0;
  void Reset(rlenv::Rng& rng, float* obs) {
    cell = static_cast<int>(rng() % kCells);
    steps = 0;
    Observe(obs);
  }
  rlenv::StepResult Step(int64_t action, float* obs) {
    cell = (cell + kCells + static_cast<int>(action) - 1) % kCells;
    ++steps;
    Observe(obs);
    rlenv::StepResult r;
    r.reward = cell == 0 ? 1.f : 0.f;
    r.terminated = steps >= kSteps;
    return r;
  }
  void Observe(float* obs) const {
    for (int k = 0; k < kCells; ++k) obs[k] = k == cell ? 1.f : 0.f;
  }
};

rlenv::Spaces Declare(int agents) {
  rlenv::Spaces s{rlenv::Space::Box({kCells}, 0, 1), rlenv::Space::Discrete(3)};
  s.reward_low = 0;
  s.reward_high = 1;
  s.agents = agents;
  return s;
}

#if RL_BENCH_AGENTS == 1
class Ring final : public rlenv::Env {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs&) { return ::Declare(1); }
  explicit Ring(const rlenv::Kwargs&) {}
  void Reset(rlenv::Rng& rng, float* obs) override { walk_.Reset(rng, obs); }
  rlenv::StepResult Step(const rlenv::Action& action, rlenv::Rng&,
                         float* obs) override {
    return walk_.Step(action.index(), obs);
  }

 private:
  Walk walk_;
};
#else
class Ring final : public rlenv::MultiAgentEnv {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs&) {
    return ::Declare(RL_BENCH_AGENTS);
  }
  explicit Ring(const rlenv::Kwargs&) {}
  void Reset(rlenv::Rng& rng, float* obs) override {
    for (int k = 0; k < RL_BENCH_AGENTS; ++k) {
      walks_[k].Reset(rng, obs + k * kCells);
    }
  }
  void Step(const rlenv::Action* actions, rlenv::Rng&, float* obs,
            rlenv::StepResult* results) override {
    for (int k = 0; k < RL_BENCH_AGENTS; ++k) {
      results[k] = walks_[k].Step(actions[k].index(), obs + k * kCells);
    }
  }

 private:
  std::array<Walk, RL_BENCH_AGENTS> walks_;
};
#endif

}  // namespace

RL_ENV_PLUGIN(Ring, "ring walk (bench)")
