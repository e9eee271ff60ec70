// An env whose agents leave early, for the tests of rl_env_plugin.h's
// "Agents that leave early" ("Leavers-v0"), built with the C++ helper.
// kwargs.agents (default 3) agents per copy; agent k's episode ends after
// 2 (k + 1) steps (terminated), so the last one ends the copy's game at
// step 2 x agents. Every step pays each agent still in the game 1. The
// observation is [k, steps so far]; the action (Discrete(2)) is ignored.
// Without env.agents_leave the helper ends every agent's episode when
// agent 0's ends (the others truncated).
#include <stdexcept>

#include "rl_env_plugin.hpp"

class Leavers final : public rlenv::MultiAgentEnv {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
    const int64_t agents = kwargs.Int("agents", 3);
    if (agents < 2 || agents > 8) {
      throw std::invalid_argument("kwargs.agents: 2 to 8");
    }
    rlenv::Spaces s{rlenv::Space::Box({2}, 0, 100), rlenv::Space::Discrete(2)};
    s.agents = static_cast<int>(agents);
    s.reward_low = 0;
    s.reward_high = 1;
    return s;
  }
  explicit Leavers(const rlenv::Kwargs& kwargs)
      : agents_(static_cast<int>(kwargs.Int("agents", 3))) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    (void)rng;
    steps_ = 0;
    Observe(obs);
  }
  void Step(const rlenv::Action* actions, rlenv::Rng& rng, float* obs,
            rlenv::StepResult* results) override {
    (void)actions;
    (void)rng;
    ++steps_;
    for (int k = 0; k < agents_; ++k) {
      const int end = 2 * (k + 1);
      results[k].reward = steps_ <= end ? 1.f : 0.f;
      results[k].terminated = steps_ == end;
    }
    Observe(obs);
  }

 private:
  void Observe(float* obs) const {
    for (int k = 0; k < agents_; ++k) {
      obs[2 * k] = static_cast<float>(k);
      obs[2 * k + 1] = static_cast<float>(steps_);
    }
  }
  const int agents_;
  int steps_ = 0;
};

RL_ENV_PLUGIN(Leavers, "leavers")
