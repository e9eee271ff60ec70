// Chase-v0: an environment of your own, as a plugin.
//
// An agent on a line at x in [-1, 1] chases a goal g placed at random.
// Observation: [x, g - x]. Actions: 0 left, 1 stay, 2 right (a step of
// kwargs.step_size, default 0.1). Reward: +1 and the episode ends when the
// agent is within kwargs.goal_radius (default 0.05) of the goal, else -0.01
// a step. The time limit is the run file's env.max_episode_steps.
//
// Build it with CMake (this folder builds on its own: see CMakeLists.txt)
// or Bazel (//examples/plugin_env:libchase_env.so), then name the library
// in a run file (chase.yaml).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "rl_env_plugin.hpp"

class Chase final : public rlenv::Env {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
    Check(kwargs);
    rlenv::Spaces spaces{rlenv::Space::Box({2}, -2.0, 2.0),
                         rlenv::Space::Discrete(3)};
    spaces.reward_low = -0.01;
    spaces.reward_high = 1.0;
    return spaces;
  }

  explicit Chase(const rlenv::Kwargs& kwargs)
      : step_size_(kwargs.Number("step_size", 0.1)),
        goal_radius_(kwargs.Number("goal_radius", 0.05)) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    x_ = uniform(rng);
    do {
      goal_ = uniform(rng);
    } while (std::abs(goal_ - x_) <= goal_radius_);
    Observe(obs);
  }

  rlenv::StepResult Step(const rlenv::Action& action, rlenv::Rng&,
                         float* obs) override {
    x_ = std::clamp(x_ + (action.index() - 1) * step_size_, -1.0, 1.0);
    Observe(obs);
    rlenv::StepResult result;
    result.terminated = std::abs(goal_ - x_) <= goal_radius_;
    result.reward = result.terminated ? 1.0f : -0.01f;
    return result;
  }

  // Optional: a run resumed from a checkpoint plays on from the same
  // positions (the helper keeps the random stream and the counters).
  void SaveState(std::string* bytes) const {
    const double state[2] = {x_, goal_};
    bytes->assign(reinterpret_cast<const char*>(state), sizeof(state));
  }
  void RestoreState(const std::string& bytes) {
    double state[2];
    if (bytes.size() != sizeof(state)) {
      throw std::invalid_argument(
          "Chase-v0 state: " + std::to_string(bytes.size()) + " bytes, not " +
          std::to_string(sizeof(state)));
    }
    std::memcpy(state, bytes.data(), sizeof(state));
    for (const double v : state) {
      if (!(v >= -1.0 && v <= 1.0)) {
        throw std::invalid_argument("Chase-v0 state: a position off [-1, 1]");
      }
    }
    x_ = state[0];
    goal_ = state[1];
  }

 private:
  static void Check(const rlenv::Kwargs& kwargs) {
    const double step = kwargs.Number("step_size", 0.1);
    const double radius = kwargs.Number("goal_radius", 0.05);
    if (!(step > 0 && step <= 1)) {
      throw std::invalid_argument("kwargs.step_size: must be in (0, 1]");
    }
    if (!(radius > 0 && radius < 1)) {
      throw std::invalid_argument("kwargs.goal_radius: must be in (0, 1)");
    }
    if (radius * 2 < step) {
      throw std::invalid_argument(
          "kwargs.goal_radius: must be at least step_size / 2, or the agent "
          "can step over the goal for ever");
    }
  }

  void Observe(float* obs) const {
    obs[0] = static_cast<float>(x_);
    obs[1] = static_cast<float>(goal_ - x_);
  }

  double step_size_;
  double goal_radius_;
  double x_ = 0;
  double goal_ = 0;
};

RL_ENV_PLUGIN(Chase, "chase 1.0")
