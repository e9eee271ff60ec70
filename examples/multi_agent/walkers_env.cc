// Walkers-v0: agents that leave their game early (rl_env_plugin.h, "Agents
// that leave early"; docs/multi_agent.md), as a plugin built with the C++
// helper. Each environment holds `agents` walkers (kwargs, default 3), each
// on a track of its own of `length` cells (default 8): cell 0 is a cliff,
// the last cell the goal. Walker k starts in cell 1 + k. Every step each
// walker steps left or right (Discrete(2)); reaching the goal pays +1 and
// falling off the cliff -1, and either ends that walker's episode: it
// leaves while the others walk on, and the game ends when the last one
// has. A walker sees its cell as a one-hot (float32 [length]).
//
// With random steps a walker from cell c reaches the goal with probability
// c / (length - 1) (the gambler's ruin), so the mean return over the three
// default walkers is 2 x 2/7 - 1 = -0.43; a policy that always steps right
// scores 1. Every walker's episode is as long as its walk, and the rows of
// walkers that arrived are padding until the slowest one does.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "rl_env_plugin.hpp"

class Walkers final : public rlenv::MultiAgentEnv {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
    const int64_t agents = kwargs.Int("agents", 3);
    const int64_t length = kwargs.Int("length", 8);
    if (agents < 2 || agents > 16) {
      throw std::invalid_argument("kwargs.agents: 2 to 16");
    }
    if (length < agents + 3 || length > 64) {
      throw std::invalid_argument(
          "kwargs.length: agents + 3 to 64 cells (every walker starts between "
          "the cliff and the goal)");
    }
    rlenv::Spaces s{rlenv::Space::Box({length}, 0, 1),
                    rlenv::Space::Discrete(2)};
    s.agents = static_cast<int>(agents);
    s.reward_low = -1;
    s.reward_high = 1;
    return s;
  }
  explicit Walkers(const rlenv::Kwargs& kwargs)
      : agents_(static_cast<int>(kwargs.Int("agents", 3))),
        length_(static_cast<int>(kwargs.Int("length", 8))),
        cell_(agents_, 0) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    (void)rng;
    for (int k = 0; k < agents_; ++k) cell_[k] = 1 + k;
    Observe(obs);
  }
  void Step(const rlenv::Action* actions, rlenv::Rng& rng, float* obs,
            rlenv::StepResult* results) override {
    (void)rng;
    for (int k = 0; k < agents_; ++k) {
      // A walker that left (at the cliff or the goal) stays there; the
      // helper ignores its result.
      if (cell_[k] == 0 || cell_[k] == length_ - 1) continue;
      cell_[k] += actions[k].discrete[0] == 1 ? 1 : -1;
      if (cell_[k] == length_ - 1) {
        results[k].reward = 1;
        results[k].terminated = true;
      } else if (cell_[k] == 0) {
        results[k].reward = -1;
        results[k].terminated = true;
      }
    }
    Observe(obs);
  }

  // A resumed run plays on from the same cells (the helper keeps which
  // walkers have left, the random stream and the counters).
  void SaveState(std::string* bytes) const {
    bytes->assign(cell_.begin(), cell_.end());  // cells < 64: a byte each
  }
  void RestoreState(const std::string& bytes) {
    if (bytes.size() != cell_.size()) {
      throw std::invalid_argument(
          "Walkers-v0 state: " + std::to_string(bytes.size()) +
          " walkers, not " + std::to_string(cell_.size()));
    }
    for (const char c : bytes) {
      if (c < 0 || c >= length_) {
        throw std::invalid_argument("Walkers-v0 state: a walker off its track");
      }
    }
    cell_.assign(bytes.begin(), bytes.end());
  }

 private:
  void Observe(float* obs) const {
    std::memset(obs, 0, sizeof(float) * agents_ * length_);
    for (int k = 0; k < agents_; ++k) obs[k * length_ + cell_[k]] = 1;
  }
  const int agents_;
  const int length_;
  std::vector<int> cell_;
};

RL_ENV_PLUGIN(Walkers, "walkers")
