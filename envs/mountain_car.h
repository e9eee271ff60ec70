// MountainCar-v0 (Gymnasium 1.0 mountain_car.py). State (position, velocity);
// reward -1 per step; terminates at position >= 0.5 with velocity >= 0.
#ifndef RL_ENVS_MOUNTAIN_CAR_H_
#define RL_ENVS_MOUNTAIN_CAR_H_

#include <math.h>

#include <cstdint>

#include "common/host_device.h"
#include "envs/random_stream.h"
#include "envs/step_result.h"

namespace rl {

struct MountainCar {
  static constexpr const char* kId = "MountainCar-v0";
  static constexpr int kStateSize = 2;
  static constexpr int kObsSize = 2;
  static constexpr int kNumActions = 3;
  static constexpr int kActionSize = 0;
  static constexpr float kActionLow = 0;
  static constexpr float kActionHigh = 0;
  static constexpr int kMaxEpisodeSteps = 200;
  // Reward: -1 a step.
  static constexpr float kRewardLow = -1.0f;
  static constexpr float kRewardHigh = 0.0f;
  using Action = int64_t;

  static constexpr double kMinPosition = -1.2;
  static constexpr double kMaxPosition = 0.6;
  static constexpr double kMaxSpeed = 0.07;
  static constexpr double kGoalPosition = 0.5;
  static constexpr double kForce = 0.001;
  static constexpr double kGravity = 0.0025;

  // np.clip(x, lo, hi) on a float64 scalar.
  RL_HOST_DEVICE static double Clip(double x, double lo, double hi) {
    const double y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }

  RL_HOST_DEVICE static StepResult Step(double* s, const Action* action) {
    double position = s[0], velocity = s[1];
    velocity += static_cast<double>(*action - 1) * kForce +
                cos(3 * position) * -kGravity;
    velocity = Clip(velocity, -kMaxSpeed, kMaxSpeed);
    position += velocity;
    position = Clip(position, kMinPosition, kMaxPosition);
    if (position == kMinPosition && velocity < 0) velocity = 0;
    s[0] = position;
    s[1] = velocity;
    StepResult r;
    r.terminated = position >= kGoalPosition && velocity >= 0;
    r.reward = -1.0f;
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

#endif  // RL_ENVS_MOUNTAIN_CAR_H_
