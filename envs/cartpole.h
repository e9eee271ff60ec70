// CartPole-v1 (Gymnasium 1.0 cartpole.py, Euler integrator, reward 1 on every
// step including the terminating one). State (x, x_dot, theta, theta_dot).
// Written branch-free so that the CPU loop over environments vectorises.
#ifndef RL_ENVS_CARTPOLE_H_
#define RL_ENVS_CARTPOLE_H_

#include <cstdint>

#include "common/host_device.h"
#include "envs/random_stream.h"
#include "envs/step_result.h"
#include "envs/trig.h"

namespace rl {

struct CartPole {
  static constexpr const char* kId = "CartPole-v1";
  static constexpr int kStateSize = 4;
  static constexpr int kObsSize = 4;
  static constexpr int kNumActions = 2;
  static constexpr int kActionSize = 0;
  static constexpr float kActionLow = 0;
  static constexpr float kActionHigh = 0;
  static constexpr int kMaxEpisodeSteps = 500;
  // Reward: 1 a step.
  static constexpr float kRewardLow = 0.0f;
  static constexpr float kRewardHigh = 1.0f;
  using Action = int64_t;

  static constexpr double kGravity = 9.8;
  static constexpr double kMassCart = 1.0;
  static constexpr double kMassPole = 0.1;
  static constexpr double kTotalMass = kMassPole + kMassCart;
  static constexpr double kLength = 0.5;  // half the pole's length
  static constexpr double kPoleMassLength = kMassPole * kLength;
  static constexpr double kForceMag = 10.0;
  static constexpr double kTau = 0.02;
  static constexpr double kThetaThreshold = 12 * 2 * 3.141592653589793 / 360;
  static constexpr double kXThreshold = 2.4;

  RL_HOST_DEVICE static StepResult Step(double* s, const Action* action) {
    const double x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
    const double force = *action == 1 ? kForceMag : -kForceMag;
    double sintheta, costheta;
    SinCos(theta, &sintheta, &costheta);
    const double temp =
        (force + kPoleMassLength * (theta_dot * theta_dot) * sintheta) /
        kTotalMass;
    const double thetaacc =
        (kGravity * sintheta - costheta * temp) /
        (kLength *
         (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
    const double xacc =
        temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
    s[0] = x + kTau * x_dot;
    s[1] = x_dot + kTau * xacc;
    s[2] = theta + kTau * theta_dot;
    s[3] = theta_dot + kTau * thetaacc;
    const bool terminated = (s[0] < -kXThreshold) | (s[0] > kXThreshold) |
                            (s[2] < -kThetaThreshold) |
                            (s[2] > kThetaThreshold);
    return StepResult{1.0f, terminated};
  }

  RL_HOST_DEVICE static void Observe(const double* s, float* obs) {
    for (int k = 0; k < kObsSize; ++k) obs[k] = static_cast<float>(s[k]);
  }

  RL_HOST_DEVICE static void Sample(const RandomStream& rng, double* s) {
    for (int k = 0; k < kStateSize; ++k) s[k] = rng.Uniform(k, -0.05, 0.05);
  }
};

}  // namespace rl

#endif  // RL_ENVS_CARTPOLE_H_
