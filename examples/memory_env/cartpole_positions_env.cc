// CartPolePositions-v0: CartPole-v1 (Gymnasium's dynamics, reward 1 per
// step, the episode ends when the pole falls or the cart leaves the track)
// observed through its positions only: the cart's x and the pole's angle,
// without their velocities. One observation cannot tell a pole falling left
// from one rising back; a policy must remember the last few (policy.core:
// lstm or gru). The run file sets the time limit (max_episode_steps: 500).
//
// Built as a plugin like any user's environment (../plugin_env/ shows the
// same with CMake):
//   bazel build //examples/memory_env:libcartpole_positions.so
#include <cmath>

#include "rl_env_plugin.hpp"

class CartPolePositions final : public rlenv::Env {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs&) {
    rlenv::Spaces spaces{rlenv::Space::Box({2}, -4.8, 4.8),
                         rlenv::Space::Discrete(2)};
    spaces.reward_low = 1;
    spaces.reward_high = 1;
    return spaces;
  }
  explicit CartPolePositions(const rlenv::Kwargs&) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    std::uniform_real_distribution<double> uniform(-0.05, 0.05);
    for (double& v : s_) v = uniform(rng);
    Observe(obs);
  }

  rlenv::StepResult Step(const rlenv::Action& action, rlenv::Rng&,
                         float* obs) override {
    constexpr double kGravity = 9.8, kMassCart = 1.0, kMassPole = 0.1;
    constexpr double kTotalMass = kMassCart + kMassPole, kLength = 0.5;
    constexpr double kPoleMassLength = kMassPole * kLength;
    constexpr double kForceMag = 10.0, kTau = 0.02;
    constexpr double kThetaThreshold = 12 * 2 * M_PI / 360, kXThreshold = 2.4;
    const double x = s_[0], x_dot = s_[1], theta = s_[2], theta_dot = s_[3];
    const double force = action.index() == 1 ? kForceMag : -kForceMag;
    const double sin_t = std::sin(theta), cos_t = std::cos(theta);
    const double temp =
        (force + kPoleMassLength * theta_dot * theta_dot * sin_t) / kTotalMass;
    const double theta_acc =
        (kGravity * sin_t - cos_t * temp) /
        (kLength * (4.0 / 3.0 - kMassPole * cos_t * cos_t / kTotalMass));
    const double x_acc =
        temp - kPoleMassLength * theta_acc * cos_t / kTotalMass;
    s_[0] = x + kTau * x_dot;
    s_[1] = x_dot + kTau * x_acc;
    s_[2] = theta + kTau * theta_dot;
    s_[3] = theta_dot + kTau * theta_acc;
    Observe(obs);
    rlenv::StepResult result;
    result.reward = 1.0f;
    result.terminated =
        std::abs(s_[0]) > kXThreshold || std::abs(s_[2]) > kThetaThreshold;
    return result;
  }

 private:
  void Observe(float* obs) const {
    obs[0] = static_cast<float>(s_[0]);
    obs[1] = static_cast<float>(s_[2]);
  }
  double s_[4] = {0, 0, 0, 0};  // x, x_dot, theta, theta_dot
};

RL_ENV_PLUGIN(CartPolePositions, "cartpole-positions 1.0")
