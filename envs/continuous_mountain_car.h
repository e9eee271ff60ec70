// MountainCarContinuous-v0 (Gymnasium 1.0 continuous_mountain_car.py).
// State (position, velocity). Gymnasium stores the state as float32 after
// every step and, under NumPy 2's promotion rules (NEP 50), does the
// force and velocity arithmetic in float32; this follows it so that long
// (999-step) trajectories agree.
#ifndef RL_ENVS_CONTINUOUS_MOUNTAIN_CAR_H_
#define RL_ENVS_CONTINUOUS_MOUNTAIN_CAR_H_

#include <math.h>

#include "common/host_device.h"
#include "envs/random_stream.h"
#include "envs/step_result.h"

namespace rl {

struct MountainCarContinuous {
  static constexpr const char* kId = "MountainCarContinuous-v0";
  static constexpr int kStateSize = 2;
  static constexpr int kObsSize = 2;
  static constexpr int kNumActions = 0;
  static constexpr int kActionSize = 1;
  static constexpr float kActionLow = -1.0f;
  static constexpr float kActionHigh = 1.0f;
  static constexpr int kMaxEpisodeSteps = 999;
  // Reward: -0.1 a^2 of the action as given (not clipped, as in
  // Gymnasium: no lower bound), plus 100 at the goal.
  static constexpr float kRewardLow = -HUGE_VALF;
  static constexpr float kRewardHigh = 100.0f;
  using Action = float;

  // Python floats meeting float32 NumPy scalars become float32.
  static constexpr float kMinPosition = -1.2f;
  static constexpr float kMaxPosition = 0.6f;
  static constexpr float kMaxSpeed = 0.07f;
  static constexpr float kGoalPosition = 0.45f;
  static constexpr float kPower = 0.0015f;

  RL_HOST_DEVICE static StepResult Step(double* s, const Action* action) {
    float position = static_cast<float>(s[0]);
    float velocity = static_cast<float>(s[1]);
    const float a = action[0];
    // min(max(a, -1.0), 1.0): a clipped bound is a Python float (float64).
    const double gravity = 0.0025 * cos(static_cast<double>(3.0f * position));
    float dv;
    if (a < kActionLow || a > kActionHigh) {
      const double force = a < kActionLow ? -1.0 : 1.0;
      dv = static_cast<float>(force * 0.0015 - gravity);
    } else {
      dv = a * kPower - static_cast<float>(gravity);
    }
    velocity += dv;
    if (velocity > kMaxSpeed) velocity = kMaxSpeed;
    if (velocity < -kMaxSpeed) velocity = -kMaxSpeed;
    position += velocity;
    if (position > kMaxPosition) position = kMaxPosition;
    if (position < kMinPosition) position = kMinPosition;
    if (position == kMinPosition && velocity < 0) velocity = 0;
    s[0] = position;
    s[1] = velocity;
    StepResult r;
    r.terminated = position >= kGoalPosition && velocity >= 0;
    double reward = r.terminated ? 100.0 : 0.0;
    reward -= static_cast<double>(a) * static_cast<double>(a) * 0.1;
    r.reward = static_cast<float>(reward);
    return r;
  }

  RL_HOST_DEVICE static void Observe(const double* s, float* obs) {
    obs[0] = static_cast<float>(s[0]);
    obs[1] = static_cast<float>(s[1]);
  }

  RL_HOST_DEVICE static void Sample(const RandomStream& rng, double* s) {
    s[0] = rng.Uniform(0, -0.6, -0.4);
    s[1] = 0;
  }
};

}  // namespace rl

#endif  // RL_ENVS_CONTINUOUS_MOUNTAIN_CAR_H_
