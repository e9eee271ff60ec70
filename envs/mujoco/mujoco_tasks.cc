// The ten tasks of Gymnasium's MuJoCo v5 set (mujoco_task.h), each the
// class of that name in gymnasium/envs/mujoco/*_v5.py, and the id -> task
// table.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>

#include "envs/mujoco/mujoco_task.h"

namespace rl::mujoco_envs {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double Square(double x) { return x * x; }

double SumOfSquares(const double* v, int n) {
  double s = 0;
  for (int k = 0; k < n; ++k) s += v[k] * v[k];
  return s;
}

double Clip(double x, double low, double high) {
  return std::min(std::max(x, low), high);
}

// numpy's norm of a 3-vector difference.
double Distance(const double* a, const double* b) {
  return std::sqrt(Square(a[0] - b[0]) + Square(a[1] - b[1]) +
                   Square(a[2] - b[2]));
}

// Writes [begin, end) of `v` and returns the next position.
double* Put(double* out, const double* v, int n) {
  std::memcpy(out, v, sizeof(double) * n);
  return out + n;
}

double* PutClipped(double* out, const double* v, int n, double low,
                   double high) {
  for (int k = 0; k < n; ++k) out[k] = Clip(v[k], low, high);
  return out + n;
}

// Gymnasium's reset noise of most tasks: qpos0 + U(-s, s), and qvel
// U(-s, s) or s * N(0, 1) (as the class draws it).
enum class QvelNoise { kUniform, kNormal };

void UniformQvel(const mjModel* m, mjData* d, Rng& rng, double s) {
  for (int k = 0; k < m->nv; ++k) {
    d->qvel[k] = std::uniform_real_distribution<double>(-s, s)(rng);
  }
}

void ResetNoise(const mjModel* m, mjData* d, Rng& rng, double s,
                QvelNoise qvel) {
  for (int k = 0; k < m->nq; ++k) {
    d->qpos[k] =
        m->qpos0[k] + std::uniform_real_distribution<double>(-s, s)(rng);
  }
  if (qvel == QvelNoise::kUniform) {
    UniformQvel(m, d, rng, s);
    return;
  }
  for (int k = 0; k < m->nv; ++k) {
    d->qvel[k] = s * std::normal_distribution<double>(0.0, 1.0)(rng);
  }
}

// HalfCheetah, Hopper, Walker2d and Swimmer: run along x (qpos[0]), observe
// qpos without the first `skipped` entries and qvel (clipped to +-10 where
// `clip_velocity`).
class Runner : public MujocoTask {
 protected:
  Runner(const rlenv::Kwargs& kw, const std::string& xml, int frame_skip,
         double ctrl_cost_weight, double reset_noise_scale, int skipped,
         bool clip_velocity, QvelNoise qvel_noise)
      : MujocoTask(kw, xml, frame_skip),
        forward_reward_weight_(Param(kw, "forward_reward_weight", 1.0)),
        ctrl_cost_weight_(Param(kw, "ctrl_cost_weight", ctrl_cost_weight)),
        reset_noise_scale_(Param(kw, "reset_noise_scale", reset_noise_scale)),
        skipped_(Flag(kw, "exclude_current_positions_from_observation", true)
                     ? skipped
                     : 0),
        clip_velocity_(clip_velocity),
        qvel_noise_(qvel_noise) {}

  void ResetModel(mjData* d, Rng& rng) const override {
    ResetNoise(model_.get(), d, rng, reset_noise_scale_, qvel_noise_);
  }
  StepOutcome DoStep(mjData* d, const double* a) const override {
    return {ForwardRewardMinusControl(d, a), false};
  }

  void ObserveInto(const mjData* d, double* obs) const override {
    const mjModel* m = model_.get();
    obs = Put(obs, d->qpos + skipped_, m->nq - skipped_);
    if (clip_velocity_) {
      PutClipped(obs, d->qvel, m->nv, -10, 10);
    } else {
      Put(obs, d->qvel, m->nv);
    }
  }

  // forward_reward_weight * x velocity - ctrl_cost_weight * |a|^2, after
  // do_simulation.
  double ForwardRewardMinusControl(mjData* d, const double* action) const {
    const double x_before = d->qpos[0];
    Simulate(d, action);
    const double x_velocity = (d->qpos[0] - x_before) / dt();
    return forward_reward_weight_ * x_velocity -
           ctrl_cost_weight_ * SumOfSquares(action, model_->nu);
  }

  const double forward_reward_weight_;
  const double ctrl_cost_weight_;
  const double reset_noise_scale_;
  const int skipped_;
  const bool clip_velocity_;
  const QvelNoise qvel_noise_;
};

// HalfCheetah and Swimmer: forward progress minus the control cost, never
// ended but by the time limit.
class Swimmer final : public Runner {
 public:
  Swimmer(const rlenv::Kwargs& kw, const std::string& xml, int frame_skip,
          double ctrl_cost_weight, int skipped, QvelNoise qvel_noise)
      : Runner(kw, xml, frame_skip, ctrl_cost_weight, 0.1, skipped, false,
               qvel_noise) {
    Finish(kw);
  }
};

// Hopper and Walker2d: a healthy reward while z (qpos[1]) and the angle
// (qpos[2]) stay in their ranges (and, for Hopper, every state entry after
// the first two), ended where unhealthy.
class Walker : public Runner {
 protected:
  Walker(const rlenv::Kwargs& kw, const std::string& xml,
         std::pair<double, double> z_range,
         std::pair<double, double> angle_range, bool check_state)
      : Runner(kw, xml, 4, 1e-3, 5e-3, 1, true, QvelNoise::kUniform),
        healthy_reward_(Param(kw, "healthy_reward", 1.0)),
        terminate_when_unhealthy_(Flag(kw, "terminate_when_unhealthy", true)),
        state_range_(check_state
                         ? Range(kw, "healthy_state_range", {-100.0, 100.0})
                         : std::pair<double, double>{-kInf, kInf}),
        z_range_(Range(kw, "healthy_z_range", z_range)),
        angle_range_(Range(kw, "healthy_angle_range", angle_range)),
        check_state_(check_state) {}

 private:
  bool IsHealthy(const mjData* d) const {
    const mjModel* m = model_.get();
    bool healthy = true;
    if (check_state_) {
      for (int k = 2; k < m->nq; ++k) {
        healthy &=
            state_range_.first < d->qpos[k] && d->qpos[k] < state_range_.second;
      }
      for (int k = 0; k < m->nv; ++k) {
        healthy &=
            state_range_.first < d->qvel[k] && d->qvel[k] < state_range_.second;
      }
    }
    const double z = d->qpos[1], angle = d->qpos[2];
    return healthy && z_range_.first < z && z < z_range_.second &&
           angle_range_.first < angle && angle < angle_range_.second;
  }
  StepOutcome DoStep(mjData* d, const double* a) const override {
    const double x_before = d->qpos[0];
    Simulate(d, a);
    const double x_velocity = (d->qpos[0] - x_before) / dt();
    const bool healthy = IsHealthy(d);
    const double reward = forward_reward_weight_ * x_velocity +
                          (healthy ? healthy_reward_ : 0.0) -
                          ctrl_cost_weight_ * SumOfSquares(a, model_->nu);
    return {reward, !healthy && terminate_when_unhealthy_};
  }

  const double healthy_reward_;
  const bool terminate_when_unhealthy_;
  const std::pair<double, double> state_range_, z_range_, angle_range_;
  const bool check_state_;
};

class Hopper final : public Walker {
 public:
  explicit Hopper(const rlenv::Kwargs& kw)
      : Walker(kw, "hopper.xml", {0.7, kInf}, {-0.2, 0.2}, true) {
    Finish(kw);
  }
};

class Walker2d final : public Walker {
 public:
  explicit Walker2d(const rlenv::Kwargs& kw)
      : Walker(kw, "walker2d_v5.xml", {0.8, 2.0}, {-1.0, 1.0}, false) {
    Finish(kw);
  }
};

class Ant final : public MujocoTask {
 public:
  explicit Ant(const rlenv::Kwargs& kw)
      : MujocoTask(kw, "ant.xml", 5),
        forward_reward_weight_(Param(kw, "forward_reward_weight", 1.0)),
        ctrl_cost_weight_(Param(kw, "ctrl_cost_weight", 0.5)),
        contact_cost_weight_(Param(kw, "contact_cost_weight", 5e-4)),
        healthy_reward_(Param(kw, "healthy_reward", 1.0)),
        main_body_(static_cast<int>(Param(kw, "main_body", 1))),
        terminate_when_unhealthy_(Flag(kw, "terminate_when_unhealthy", true)),
        z_range_(Range(kw, "healthy_z_range", {0.2, 1.0})),
        force_range_(Range(kw, "contact_force_range", {-1.0, 1.0})),
        reset_noise_scale_(Param(kw, "reset_noise_scale", 0.1)),
        skipped_(Flag(kw, "exclude_current_positions_from_observation", true)
                     ? 2
                     : 0),
        cfrc_ext_(Flag(kw, "include_cfrc_ext_in_observation", true)) {
    if (main_body_ < 0 || main_body_ >= model_->nbody) {
      throw std::invalid_argument(
          "kwargs.main_body: not a body id of the model");
    }
    Finish(kw);
  }

 private:
  void ResetModel(mjData* d, Rng& rng) const override {
    ResetNoise(model_.get(), d, rng, reset_noise_scale_, QvelNoise::kNormal);
  }
  StepOutcome DoStep(mjData* d, const double* a) const override {
    const mjModel* m = model_.get();
    const double x_before = d->xpos[3 * main_body_];
    Simulate(d, a);
    const double x_velocity = (d->xpos[3 * main_body_] - x_before) / dt();
    bool healthy =
        d->qpos[2] >= z_range_.first && d->qpos[2] <= z_range_.second;
    for (int k = 0; k < m->nq; ++k) healthy &= std::isfinite(d->qpos[k]);
    for (int k = 0; k < m->nv; ++k) healthy &= std::isfinite(d->qvel[k]);
    double contact = 0;
    for (int k = 0; k < 6 * m->nbody; ++k) {
      contact +=
          Square(Clip(d->cfrc_ext[k], force_range_.first, force_range_.second));
    }
    const double reward = x_velocity * forward_reward_weight_ +
                          (healthy ? healthy_reward_ : 0.0) -
                          (ctrl_cost_weight_ * SumOfSquares(a, m->nu) +
                           contact_cost_weight_ * contact);
    return {reward, !healthy && terminate_when_unhealthy_};
  }
  void ObserveInto(const mjData* d, double* obs) const override {
    const mjModel* m = model_.get();
    obs = Put(obs, d->qpos + skipped_, m->nq - skipped_);
    obs = Put(obs, d->qvel, m->nv);
    if (cfrc_ext_) {
      PutClipped(obs, d->cfrc_ext + 6, 6 * (m->nbody - 1), force_range_.first,
                 force_range_.second);
    }
  }

  const double forward_reward_weight_, ctrl_cost_weight_, contact_cost_weight_,
      healthy_reward_;
  const int main_body_;
  const bool terminate_when_unhealthy_;
  const std::pair<double, double> z_range_, force_range_;
  const double reset_noise_scale_;
  const int skipped_;
  const bool cfrc_ext_;
};

class Humanoid final : public MujocoTask {
 public:
  explicit Humanoid(const rlenv::Kwargs& kw)
      : MujocoTask(kw, "humanoid.xml", 5),
        forward_reward_weight_(Param(kw, "forward_reward_weight", 1.25)),
        ctrl_cost_weight_(Param(kw, "ctrl_cost_weight", 0.1)),
        contact_cost_weight_(Param(kw, "contact_cost_weight", 5e-7)),
        contact_cost_range_(Range(kw, "contact_cost_range", {-kInf, 10.0})),
        healthy_reward_(Param(kw, "healthy_reward", 5.0)),
        terminate_when_unhealthy_(Flag(kw, "terminate_when_unhealthy", true)),
        z_range_(Range(kw, "healthy_z_range", {1.0, 2.0})),
        reset_noise_scale_(Param(kw, "reset_noise_scale", 0.01)),
        skipped_(Flag(kw, "exclude_current_positions_from_observation", true)
                     ? 2
                     : 0),
        cinert_(Flag(kw, "include_cinert_in_observation", true)),
        cvel_(Flag(kw, "include_cvel_in_observation", true)),
        qfrc_actuator_(Flag(kw, "include_qfrc_actuator_in_observation", true)),
        cfrc_ext_(Flag(kw, "include_cfrc_ext_in_observation", true)) {
    for (int b = 0; b < model_->nbody; ++b) total_mass_ += model_->body_mass[b];
    Finish(kw);
  }

 private:
  // The x of the mass centre (Gymnasium's mass_center, from xipos).
  double MassCenterX(const mjData* d) const {
    const mjModel* m = model_.get();
    double x = 0;
    for (int b = 0; b < m->nbody; ++b) x += m->body_mass[b] * d->xipos[3 * b];
    return x / total_mass_;
  }
  void ResetModel(mjData* d, Rng& rng) const override {
    ResetNoise(model_.get(), d, rng, reset_noise_scale_, QvelNoise::kUniform);
  }
  StepOutcome DoStep(mjData* d, const double* a) const override {
    const mjModel* m = model_.get();
    const double x_before = MassCenterX(d);
    Simulate(d, a);
    const double x_velocity = (MassCenterX(d) - x_before) / dt();
    const bool healthy =
        z_range_.first < d->qpos[2] && d->qpos[2] < z_range_.second;
    const double contact =
        Clip(contact_cost_weight_ * SumOfSquares(d->cfrc_ext, 6 * m->nbody),
             contact_cost_range_.first, contact_cost_range_.second);
    const double reward =
        forward_reward_weight_ * x_velocity +
        (healthy ? healthy_reward_ : 0.0) -
        (ctrl_cost_weight_ * SumOfSquares(d->ctrl, m->nu) + contact);
    return {reward, !healthy && terminate_when_unhealthy_};
  }
  void ObserveInto(const mjData* d, double* obs) const override {
    const mjModel* m = model_.get();
    const int bodies = m->nbody - 1;
    obs = Put(obs, d->qpos + skipped_, m->nq - skipped_);
    obs = Put(obs, d->qvel, m->nv);
    if (cinert_) obs = Put(obs, d->cinert + 10, 10 * bodies);
    if (cvel_) obs = Put(obs, d->cvel + 6, 6 * bodies);
    if (qfrc_actuator_) obs = Put(obs, d->qfrc_actuator + 6, m->nv - 6);
    if (cfrc_ext_) Put(obs, d->cfrc_ext + 6, 6 * bodies);
  }

  const double forward_reward_weight_, ctrl_cost_weight_, contact_cost_weight_;
  const std::pair<double, double> contact_cost_range_;
  const double healthy_reward_;
  const bool terminate_when_unhealthy_;
  const std::pair<double, double> z_range_;
  const double reset_noise_scale_;
  const int skipped_;
  const bool cinert_, cvel_, qfrc_actuator_, cfrc_ext_;
  double total_mass_ = 0;
};

class InvertedPendulum final : public MujocoTask {
 public:
  explicit InvertedPendulum(const rlenv::Kwargs& kw)
      : MujocoTask(kw, "inverted_pendulum.xml", 2),
        reset_noise_scale_(Param(kw, "reset_noise_scale", 0.01)) {
    Finish(kw);
  }
  double reward_low() const override { return 0; }
  double reward_high() const override { return 1; }

 private:
  void ResetModel(mjData* d, Rng& rng) const override {
    ResetNoise(model_.get(), d, rng, reset_noise_scale_, QvelNoise::kUniform);
  }
  StepOutcome DoStep(mjData* d, const double* a) const override {
    Simulate(d, a);
    double obs[4];
    ObserveInto(d, obs);
    bool finite = true;
    for (double v : obs) finite &= std::isfinite(v);
    const bool terminated = !finite || std::abs(obs[1]) > 0.2;
    return {terminated ? 0.0 : 1.0, terminated};
  }
  void ObserveInto(const mjData* d, double* obs) const override {
    obs = Put(obs, d->qpos, model_->nq);
    Put(obs, d->qvel, model_->nv);
  }

  const double reset_noise_scale_;
};

class InvertedDoublePendulum final : public MujocoTask {
 public:
  explicit InvertedDoublePendulum(const rlenv::Kwargs& kw)
      : MujocoTask(kw, "inverted_double_pendulum.xml", 5),
        healthy_reward_(Param(kw, "healthy_reward", 10.0)),
        reset_noise_scale_(Param(kw, "reset_noise_scale", 0.1)) {
    Finish(kw);
  }

 private:
  void ResetModel(mjData* d, Rng& rng) const override {
    ResetNoise(model_.get(), d, rng, reset_noise_scale_, QvelNoise::kNormal);
  }
  StepOutcome DoStep(mjData* d, const double* a) const override {
    Simulate(d, a);
    const double x = d->site_xpos[0], y = d->site_xpos[2];
    const bool terminated = y <= 1;
    const double v1 = d->qvel[1], v2 = d->qvel[2];
    const double dist_penalty = 0.01 * x * x + Square(y - 2);
    const double vel_penalty = 1e-3 * v1 * v1 + 5e-3 * v2 * v2;
    const double alive = terminated ? 0.0 : healthy_reward_;
    return {alive - dist_penalty - vel_penalty, terminated};
  }
  void ObserveInto(const mjData* d, double* obs) const override {
    const mjModel* m = model_.get();
    *obs++ = d->qpos[0];
    for (int k = 1; k < m->nq; ++k) *obs++ = std::sin(d->qpos[k]);
    for (int k = 1; k < m->nq; ++k) *obs++ = std::cos(d->qpos[k]);
    obs = PutClipped(obs, d->qvel, m->nv, -10, 10);
    PutClipped(obs, d->qfrc_constraint, 1, -10, 10);
  }

  const double healthy_reward_;
  const double reset_noise_scale_;
};

class Reacher final : public MujocoTask {
 public:
  explicit Reacher(const rlenv::Kwargs& kw)
      : MujocoTask(kw, "reacher.xml", 2),
        reward_dist_weight_(Param(kw, "reward_dist_weight", 1.0)),
        reward_control_weight_(Param(kw, "reward_control_weight", 1.0)),
        fingertip_(BodyId("fingertip")),
        target_(BodyId("target")) {
    Finish(kw);
  }
  int default_max_episode_steps() const override { return 50; }

 private:
  void ResetModel(mjData* d, Rng& rng) const override {
    const mjModel* m = model_.get();
    for (int k = 0; k < m->nq; ++k)
      d->qpos[k] = Uniform(rng, -0.1, 0.1) + m->qpos0[k];
    double goal[2];
    do {
      goal[0] = Uniform(rng, -0.2, 0.2);
      goal[1] = Uniform(rng, -0.2, 0.2);
    } while (std::hypot(goal[0], goal[1]) >= 0.2);
    d->qpos[m->nq - 2] = goal[0];
    d->qpos[m->nq - 1] = goal[1];
    UniformQvel(m, d, rng, 0.005);
    d->qvel[m->nv - 2] = 0;
    d->qvel[m->nv - 1] = 0;
  }
  StepOutcome DoStep(mjData* d, const double* a) const override {
    Simulate(d, a);
    const double dist =
        Distance(d->xpos + 3 * fingertip_, d->xpos + 3 * target_);
    return {-dist * reward_dist_weight_ -
                SumOfSquares(a, model_->nu) * reward_control_weight_,
            false};
  }
  void ObserveInto(const mjData* d, double* obs) const override {
    const mjModel* m = model_.get();
    *obs++ = std::cos(d->qpos[0]);
    *obs++ = std::cos(d->qpos[1]);
    *obs++ = std::sin(d->qpos[0]);
    *obs++ = std::sin(d->qpos[1]);
    obs = Put(obs, d->qpos + 2, m->nq - 2);
    obs = Put(obs, d->qvel, 2);
    for (int k = 0; k < 2; ++k) {
      *obs++ = d->xpos[3 * fingertip_ + k] - d->xpos[3 * target_ + k];
    }
  }

  const double reward_dist_weight_, reward_control_weight_;
  const int fingertip_, target_;
};

class Pusher final : public MujocoTask {
 public:
  explicit Pusher(const rlenv::Kwargs& kw)
      : MujocoTask(kw, "pusher_v5.xml", 5),
        reward_near_weight_(Param(kw, "reward_near_weight", 0.5)),
        reward_dist_weight_(Param(kw, "reward_dist_weight", 1.0)),
        reward_control_weight_(Param(kw, "reward_control_weight", 0.1)),
        tips_arm_(BodyId("tips_arm")),
        object_(BodyId("object")),
        goal_(BodyId("goal")) {
    Finish(kw);
  }
  int default_max_episode_steps() const override { return 100; }

 private:
  void ResetModel(mjData* d, Rng& rng) const override {
    const mjModel* m = model_.get();
    for (int k = 0; k < m->nq; ++k) d->qpos[k] = m->qpos0[k];
    double cylinder[2];
    do {
      cylinder[0] = Uniform(rng, -0.3, 0);
      cylinder[1] = Uniform(rng, -0.2, 0.2);
    } while (std::hypot(cylinder[0], cylinder[1]) <= 0.17);
    d->qpos[m->nq - 4] = cylinder[0];
    d->qpos[m->nq - 3] = cylinder[1];
    d->qpos[m->nq - 2] = 0;
    d->qpos[m->nq - 1] = 0;
    UniformQvel(m, d, rng, 0.005);
    for (int k = m->nv - 4; k < m->nv; ++k) d->qvel[k] = 0;
  }
  StepOutcome DoStep(mjData* d, const double* a) const override {
    Simulate(d, a);
    const double* object = d->xpos + 3 * object_;
    const double near =
        -Distance(object, d->xpos + 3 * tips_arm_) * reward_near_weight_;
    const double dist =
        -Distance(object, d->xpos + 3 * goal_) * reward_dist_weight_;
    const double ctrl = -SumOfSquares(a, model_->nu) * reward_control_weight_;
    return {dist + ctrl + near, false};
  }
  void ObserveInto(const mjData* d, double* obs) const override {
    obs = Put(obs, d->qpos, 7);
    obs = Put(obs, d->qvel, 7);
    obs = Put(obs, d->xpos + 3 * tips_arm_, 3);
    obs = Put(obs, d->xpos + 3 * object_, 3);
    Put(obs, d->xpos + 3 * goal_, 3);
  }

  const double reward_near_weight_, reward_dist_weight_, reward_control_weight_;
  const int tips_arm_, object_, goal_;
};

using Factory =
    std::function<std::unique_ptr<MujocoTask>(const rlenv::Kwargs&)>;

const std::map<std::string, Factory>& Factories() {
  static const auto* factories = new std::map<std::string, Factory>{
      {"Ant-v5",
       [](const rlenv::Kwargs& k) { return std::make_unique<Ant>(k); }},
      {"HalfCheetah-v5",
       [](const rlenv::Kwargs& k) {
         return std::make_unique<Swimmer>(k, "half_cheetah.xml", 5, 0.1, 1,
                                          QvelNoise::kNormal);
       }},
      {"Hopper-v5",
       [](const rlenv::Kwargs& k) { return std::make_unique<Hopper>(k); }},
      {"Humanoid-v5",
       [](const rlenv::Kwargs& k) { return std::make_unique<Humanoid>(k); }},
      {"InvertedDoublePendulum-v5",
       [](const rlenv::Kwargs& k) {
         return std::make_unique<InvertedDoublePendulum>(k);
       }},
      {"InvertedPendulum-v5",
       [](const rlenv::Kwargs& k) {
         return std::make_unique<InvertedPendulum>(k);
       }},
      {"Pusher-v5",
       [](const rlenv::Kwargs& k) { return std::make_unique<Pusher>(k); }},
      {"Reacher-v5",
       [](const rlenv::Kwargs& k) { return std::make_unique<Reacher>(k); }},
      {"Swimmer-v5",
       [](const rlenv::Kwargs& k) {
         return std::make_unique<Swimmer>(k, "swimmer.xml", 4, 1e-4, 2,
                                          QvelNoise::kUniform);
       }},
      {"Walker2d-v5",
       [](const rlenv::Kwargs& k) { return std::make_unique<Walker2d>(k); }},
  };
  return *factories;
}

}  // namespace

const std::vector<std::string>& MujocoTaskIds() {
  static const auto* ids = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& [id, f] : Factories()) v->push_back(id);
    return v;
  }();
  return *ids;
}

std::unique_ptr<MujocoTask> MakeMujocoTask(const std::string& id,
                                           const rlenv::Kwargs& kwargs) {
  const auto it = Factories().find(id);
  if (it == Factories().end()) {
    std::string known;
    for (const std::string& k : MujocoTaskIds())
      known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument("env.id \"" + id +
                                "\": not a MuJoCo environment of this plugin "
                                "(it serves " +
                                known + ")");
  }
  return it->second(kwargs);
}

}  // namespace rl::mujoco_envs
