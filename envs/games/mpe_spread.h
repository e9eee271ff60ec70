// MPE's Simple Spread (PettingZoo 1.25's simple_spread_v3, discrete moves)
// as plain C++: the world's state, its physics step, its rewards and each
// agent's observation, written operation for operation as PettingZoo's
// numpy code (pettingzoo/mpe/_mpe_utils/core.py, simple_env.py and
// simple_spread/simple_spread.py), in double precision as numpy computes
// it, so that a trajectory started from the same positions with the same
// moves gives the same observations and rewards. The plugin
// (mpe_spread_plugin.cc) wraps it; the golden test replays PettingZoo's own
// trajectories through it (tools/record_mpe_golden.py).
//
// N agents (radius 0.15, mass 1) and N landmarks on a plane. Every step
// agent i's move (0 none, 1 left, 2 right, 3 down, 4 up) pushes it with a
// force of 5; agents that overlap push each other apart (a soft contact,
// 100 x margin x softplus(-(distance - 0.3) / margin), margin 1e-3); then
// position += velocity x 0.1, velocity x= 0.75, velocity += force x 0.1.
// Landmarks never move or collide. Agent i's reward is
//   (1 - local_ratio) x (minus the sum over landmarks of the distance to
//   the nearest agent) + local_ratio x (minus the agents it overlaps).
// Its observation, float32 [6N] (2 + 2 + 2N + 2(N - 1) + 2(N - 1)): its
// velocity, its position, each landmark's position relative to it, each
// other agent's position relative to it, and the others' communication
// (always 0: the agents are silent).
#ifndef ENVS_GAMES_MPE_SPREAD_H_
#define ENVS_GAMES_MPE_SPREAD_H_

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rlenv {
namespace mpe {

class SpreadWorld {
 public:
  static constexpr double kAgentSize = 0.15;
  static constexpr double kDt = 0.1;
  static constexpr double kDamping = 0.25;
  static constexpr double kContactForce = 1e2;
  static constexpr double kContactMargin = 1e-3;
  static constexpr double kSensitivity = 5.0;
  static constexpr int kMoves = 5;

  static int ObservationSize(int n) { return 2 + 2 + 2 * n + 4 * (n - 1); }

  SpreadWorld(int n, double local_ratio)
      : n_(n),
        local_ratio_(local_ratio),
        agent_pos_(2 * n),
        agent_vel_(2 * n),
        landmark_pos_(2 * n),
        force_(2 * n) {}

  int n() const { return n_; }
  int observation_size() const { return ObservationSize(n_); }

  // Places the agents and landmarks (x, y each, in order) at rest.
  void Place(const double* agents_xy, const double* landmarks_xy) {
    for (int i = 0; i < 2 * n_; ++i) {
      agent_pos_[i] = agents_xy[i];
      agent_vel_[i] = 0.0;
      landmark_pos_[i] = landmarks_xy[i];
    }
  }
  // Puts the world where a saved one was: agent positions and velocities,
  // landmark positions (x, y each, in order).
  void Restore(const double* agents_xy, const double* agents_velocity,
               const double* landmarks_xy) {
    for (int i = 0; i < 2 * n_; ++i) {
      agent_pos_[i] = agents_xy[i];
      agent_vel_[i] = agents_velocity[i];
      landmark_pos_[i] = landmarks_xy[i];
    }
  }
  const std::vector<double>& agent_positions() const { return agent_pos_; }
  const std::vector<double>& agent_velocities() const { return agent_vel_; }
  const std::vector<double>& landmark_positions() const {
    return landmark_pos_;
  }

  // One step of every agent's move (moves[i] in [0, 5)); writes each
  // agent's reward.
  void Step(const int64_t* moves, double* rewards) {
    // simple_env._set_action: the move's unit force times the sensitivity.
    for (int i = 0; i < n_; ++i) {
      const int64_t m = moves[i];
      if (m < 0 || m >= kMoves) {
        throw std::invalid_argument("action " + std::to_string(m) +
                                    " of agent_" + std::to_string(i) +
                                    "; 0 (none), 1 (left), 2 (right), 3 "
                                    "(down) or 4 (up)");
      }
      double u0 = 0.0, u1 = 0.0;
      if (m == 1) u0 = -1.0;
      if (m == 2) u0 = +1.0;
      if (m == 3) u1 = -1.0;
      if (m == 4) u1 = +1.0;
      force_[2 * i] = u0 * kSensitivity;
      force_[2 * i + 1] = u1 * kSensitivity;
    }
    // World.apply_environment_force: every pair of agents, a < b, in order
    // (landmarks do not collide).
    for (int a = 0; a < n_; ++a) {
      for (int b = a + 1; b < n_; ++b) {
        const double dx = agent_pos_[2 * a] - agent_pos_[2 * b];
        const double dy = agent_pos_[2 * a + 1] - agent_pos_[2 * b + 1];
        const double dist = std::sqrt(dx * dx + dy * dy);
        const double dist_min = kAgentSize + kAgentSize;
        const double penetration =
            LogAddExp0(-(dist - dist_min) / kContactMargin) * kContactMargin;
        const double fx = kContactForce * dx / dist * penetration;
        const double fy = kContactForce * dy / dist * penetration;
        force_[2 * a] = fx + force_[2 * a];
        force_[2 * a + 1] = fy + force_[2 * a + 1];
        force_[2 * b] = -fx + force_[2 * b];
        force_[2 * b + 1] = -fy + force_[2 * b + 1];
      }
    }
    // World.integrate_state (mass 1, no speed limit).
    for (int i = 0; i < 2 * n_; ++i) {
      agent_pos_[i] += agent_vel_[i] * kDt;
      agent_vel_[i] = agent_vel_[i] * (1 - kDamping);
      agent_vel_[i] += (force_[i] / 1.0) * kDt;
    }
    // Scenario.global_reward and Scenario.reward, mixed by local_ratio.
    double global = 0.0;
    for (int l = 0; l < n_; ++l) {
      double nearest = 0.0;
      for (int a = 0; a < n_; ++a) {
        const double d = Distance(&agent_pos_[2 * a], &landmark_pos_[2 * l]);
        if (a == 0 || d < nearest) nearest = d;
      }
      global -= nearest;
    }
    for (int i = 0; i < n_; ++i) {
      double local = 0.0;
      for (int a = 0; a < n_; ++a) {
        if (a != i && Distance(&agent_pos_[2 * a], &agent_pos_[2 * i]) <
                          kAgentSize + kAgentSize) {
          local -= 1.0;
        }
      }
      rewards[i] = global * (1 - local_ratio_) + local * local_ratio_;
    }
  }

  // Every agent's observation in turn (observation_size() floats each).
  void Observe(float* obs) const {
    for (int i = 0; i < n_; ++i) {
      const double x = agent_pos_[2 * i], y = agent_pos_[2 * i + 1];
      *obs++ = static_cast<float>(agent_vel_[2 * i]);
      *obs++ = static_cast<float>(agent_vel_[2 * i + 1]);
      *obs++ = static_cast<float>(x);
      *obs++ = static_cast<float>(y);
      for (int l = 0; l < n_; ++l) {
        *obs++ = static_cast<float>(landmark_pos_[2 * l] - x);
        *obs++ = static_cast<float>(landmark_pos_[2 * l + 1] - y);
      }
      for (int a = 0; a < n_; ++a) {
        if (a == i) continue;
        *obs++ = static_cast<float>(agent_pos_[2 * a] - x);
        *obs++ = static_cast<float>(agent_pos_[2 * a + 1] - y);
      }
      for (int c = 0; c < 2 * (n_ - 1); ++c) *obs++ = 0.f;
    }
  }

 private:
  // numpy.logaddexp(0, z), as numpy computes it.
  static double LogAddExp0(double z) {
    if (z == 0.0) return z + M_LN2;
    const double tmp = 0.0 - z;
    return tmp > 0 ? 0.0 + std::log1p(std::exp(-tmp))
                   : z + std::log1p(std::exp(tmp));
  }
  static double Distance(const double* a, const double* b) {
    const double dx = a[0] - b[0], dy = a[1] - b[1];
    return std::sqrt(dx * dx + dy * dy);
  }

  const int n_;
  const double local_ratio_;
  std::vector<double> agent_pos_, agent_vel_, landmark_pos_, force_;
};

}  // namespace mpe
}  // namespace rlenv

#endif  // ENVS_GAMES_MPE_SPREAD_H_
