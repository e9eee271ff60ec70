// Pendulum-v1 (Gymnasium 1.0 pendulum.py, g = 10). State (theta, theta_dot);
// observation (cos theta, sin theta, theta_dot); never terminates. The
// torque terms are float32 arithmetic in Gymnasium (NumPy 2, NEP 50), and
// here too.
#ifndef RL_ENVS_PENDULUM_H_
#define RL_ENVS_PENDULUM_H_

#include <math.h>

#include "common/host_device.h"
#include "envs/random_stream.h"
#include "envs/step_result.h"

namespace rl {

struct Pendulum {
  static constexpr const char* kId = "Pendulum-v1";
  static constexpr int kStateSize = 2;
  static constexpr int kObsSize = 3;
  static constexpr int kNumActions = 0;
  static constexpr int kActionSize = 1;
  static constexpr float kActionLow = -2.0f;
  static constexpr float kActionHigh = 2.0f;
  static constexpr int kMaxEpisodeSteps = 200;
  // Reward: -(theta^2 + 0.1 thdot^2 + 0.001 u^2), |theta| <= pi,
  // |thdot| <= 8, |u| <= 2.
  static constexpr float kRewardLow = -16.2736044f;
  static constexpr float kRewardHigh = 0.0f;
  using Action = float;

  static constexpr double kPi = 3.141592653589793;
  static constexpr double kMaxSpeed = 8;
  static constexpr double kDt = 0.05;
  static constexpr double kG = 10.0;

  // NumPy's float64 remainder (the sign of the divisor), then - pi.
  RL_HOST_DEVICE static double AngleNormalize(double x) {
    const double a = x + kPi, b = 2 * kPi;
    double mod = fmod(a, b);
    if (mod != 0) {
      if ((b < 0) != (mod < 0)) mod += b;
    } else {
      mod = copysign(0.0, b);
    }
    return mod - kPi;
  }

  RL_HOST_DEVICE static StepResult Step(double* s, const Action* action) {
    const double th = s[0], thdot = s[1];
    float u = action[0];
    u = u < kActionLow ? kActionLow : u;
    u = u > kActionHigh ? kActionHigh : u;
    const double th_norm = AngleNormalize(th);
    const double costs = th_norm * th_norm + 0.1 * (thdot * thdot) +
                         static_cast<double>(0.001f * (u * u));
    double newthdot =
        thdot +
        (3 * kG / (2 * 1.0) * sin(th) + static_cast<double>(3.0f * u)) * kDt;
    newthdot = newthdot < -kMaxSpeed ? -kMaxSpeed : newthdot;
    newthdot = newthdot > kMaxSpeed ? kMaxSpeed : newthdot;
    s[0] = th + newthdot * kDt;
    s[1] = newthdot;
    StepResult r;
    r.terminated = false;
    r.reward = static_cast<float>(-costs);
    return r;
  }

  RL_HOST_DEVICE static void Observe(const double* s, float* obs) {
    obs[0] = static_cast<float>(cos(s[0]));
    obs[1] = static_cast<float>(sin(s[0]));
    obs[2] = static_cast<float>(s[1]);
  }

  RL_HOST_DEVICE static void Sample(const RandomStream& rng, double* s) {
    s[0] = rng.Uniform(0, -kPi, kPi);
    s[1] = rng.Uniform(1, -1.0, 1.0);
  }
};

}  // namespace rl

#endif  // RL_ENVS_PENDULUM_H_
