// Acrobot-v1 (Gymnasium 1.0 acrobot.py: book dynamics, one RK4 step of
// dt = 0.2, no torque noise). State (theta1, theta2, dtheta1, dtheta2);
// observation (cos t1, sin t1, cos t2, sin t2, dt1, dt2). The arithmetic
// follows Gymnasium's expression order so that trajectories agree closely
// (the double pendulum is chaotic).
#ifndef RL_ENVS_ACROBOT_H_
#define RL_ENVS_ACROBOT_H_

#include <math.h>

#include <cstdint>

#include "common/host_device.h"
#include "envs/random_stream.h"
#include "envs/step_result.h"

namespace rl {

struct Acrobot {
  static constexpr const char* kId = "Acrobot-v1";
  static constexpr int kStateSize = 4;
  static constexpr int kObsSize = 6;
  static constexpr int kNumActions = 3;
  static constexpr int kActionSize = 0;
  static constexpr float kActionLow = 0;
  static constexpr float kActionHigh = 0;
  static constexpr int kMaxEpisodeSteps = 500;
  // Reward: -1 a step, 0 at the goal.
  static constexpr float kRewardLow = -1.0f;
  static constexpr float kRewardHigh = 0.0f;
  using Action = int64_t;

  static constexpr double kPi = 3.141592653589793;
  static constexpr double kDt = 0.2;
  static constexpr double kMaxVel1 = 4 * kPi;
  static constexpr double kMaxVel2 = 9 * kPi;

  // Gymnasium's _dsdt for the state y = (t1, t2, dt1, dt2) and torque a.
  RL_HOST_DEVICE static void Derivs(const double* y, double a, double* dy) {
    constexpr double m1 = 1.0, m2 = 1.0, l1 = 1.0, lc1 = 0.5, lc2 = 0.5;
    constexpr double I1 = 1.0, I2 = 1.0, g = 9.8;
    const double theta1 = y[0], theta2 = y[1], dtheta1 = y[2], dtheta2 = y[3];
    const double cos_t2 = cos(theta2), sin_t2 = sin(theta2);
    const double d1 = m1 * (lc1 * lc1) +
                      m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * cos_t2) + I1 +
                      I2;
    const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos_t2) + I2;
    const double phi2 = m2 * lc2 * g * cos(theta1 + theta2 - kPi / 2.0);
    const double phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin_t2 -
                        2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin_t2 +
                        (m1 * lc1 + m2 * l1) * g * cos(theta1 - kPi / 2) + phi2;
    const double ddtheta2 =
        (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin_t2 -
         phi2) /
        (m2 * (lc2 * lc2) + I2 - (d2 * d2) / d1);
    const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    dy[0] = dtheta1;
    dy[1] = dtheta2;
    dy[2] = ddtheta1;
    dy[3] = ddtheta2;
  }

  RL_HOST_DEVICE static double Wrap(double x, double m, double M) {
    if (!isfinite(x)) return x;
    const double diff = M - m;
    while (x > M) x = x - diff;
    while (x < m) x = x + diff;
    return x;
  }

  // Python's min(max(x, m), M).
  RL_HOST_DEVICE static double Bound(double x, double m, double M) {
    const double lo = m > x ? m : x;
    return M < lo ? M : lo;
  }

  RL_HOST_DEVICE static StepResult Step(double* s, const Action* action) {
    const double torque = static_cast<double>(*action - 1);
    constexpr double dt = kDt - 0.0;
    constexpr double dt2 = dt / 2.0;
    double k1[4], k2[4], k3[4], k4[4], y[4];
    Derivs(s, torque, k1);
    for (int j = 0; j < 4; ++j) y[j] = s[j] + dt2 * k1[j];
    Derivs(y, torque, k2);
    for (int j = 0; j < 4; ++j) y[j] = s[j] + dt2 * k2[j];
    Derivs(y, torque, k3);
    for (int j = 0; j < 4; ++j) y[j] = s[j] + dt * k3[j];
    Derivs(y, torque, k4);
    for (int j = 0; j < 4; ++j) {
      y[j] = s[j] + dt / 6.0 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j]);
    }
    s[0] = Wrap(y[0], -kPi, kPi);
    s[1] = Wrap(y[1], -kPi, kPi);
    s[2] = Bound(y[2], -kMaxVel1, kMaxVel1);
    s[3] = Bound(y[3], -kMaxVel2, kMaxVel2);
    StepResult r;
    r.terminated = -cos(s[0]) - cos(s[1] + s[0]) > 1.0;
    r.reward = r.terminated ? 0.0f : -1.0f;
    return r;
  }

  RL_HOST_DEVICE static void Observe(const double* s, float* obs) {
    obs[0] = static_cast<float>(cos(s[0]));
    obs[1] = static_cast<float>(sin(s[0]));
    obs[2] = static_cast<float>(cos(s[1]));
    obs[3] = static_cast<float>(sin(s[1]));
    obs[4] = static_cast<float>(s[2]);
    obs[5] = static_cast<float>(s[3]);
  }

  // Gymnasium draws the initial state in float64 and stores it as float32.
  RL_HOST_DEVICE static void Sample(const RandomStream& rng, double* s) {
    for (int k = 0; k < kStateSize; ++k) {
      s[k] = static_cast<float>(rng.Uniform(k, -0.1, 0.1));
    }
  }
};

}  // namespace rl

#endif  // RL_ENVS_ACROBOT_H_
