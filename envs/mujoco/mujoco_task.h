// Gymnasium's MuJoCo v5 environments in C++: one task per id
// (HalfCheetah-v5, Hopper-v5, ...), each the same observation, reward,
// termination, reset noise and default kwargs as Gymnasium 1.1.1's class of
// that name, stepped by the libmujoco that Gymnasium's pinned `mujoco` wheel
// ships. A task holds the one mjModel every environment of a batch shares;
// each environment is one mjData (mujoco_batch.h).
//
// Data flow of one step: action (float32, the run's Box) -> ctrl ->
// mj_step x frame_skip -> mj_rnePostConstraint (as Gymnasium's
// do_simulation: cfrc_ext for Ant and Humanoid) -> reward and termination
// from the quantities before and after -> observation (float64 math, written
// as float32).
#ifndef RL_ENVS_MUJOCO_MUJOCO_TASK_H_
#define RL_ENVS_MUJOCO_MUJOCO_TASK_H_

#include <mujoco/mujoco.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "rl_env_plugin.hpp"

namespace rl::mujoco_envs {

using Rng = std::mt19937_64;

// What one step gives besides the observation.
struct StepOutcome {
  double reward = 0;
  bool terminated = false;
};

// An mjModel owned by unique_ptr.
struct ModelDeleter {
  void operator()(mjModel* m) const { mj_deleteModel(m); }
};
using ModelPtr = std::unique_ptr<mjModel, ModelDeleter>;

class MujocoTask {
 public:
  virtual ~MujocoTask() = default;

  const mjModel* model() const { return model_.get(); }
  int frame_skip() const { return frame_skip_; }
  int observation_size() const { return observation_size_; }
  // Gymnasium's dt: timestep x frame_skip.
  double dt() const { return model_->opt.timestep * frame_skip_; }
  // The time limit Gymnasium registers the id with.
  virtual int default_max_episode_steps() const { return 1000; }
  // Every reward lies in [reward_low, reward_high] (unbounded by default).
  virtual double reward_low() const;
  virtual double reward_high() const;

  // Gymnasium's reset(): mj_resetData, the task's noise on qpos/qvel
  // (reset_model), mj_forward (set_state).
  void Reset(mjData* d, Rng& rng) const;
  // One step of Gymnasium's step(): `action` has model()->nu elements.
  StepOutcome Step(mjData* d, const float* action) const;
  // Gymnasium's _get_obs(), as float32.
  void Observe(const mjData* d, float* obs) const;

 protected:
  // Loads `xml` (an embedded Gymnasium asset, or kwargs.xml_file: a path)
  // and reads the kwargs every task has (xml_file, frame_skip). Throws
  // std::invalid_argument naming the kwarg.
  MujocoTask(const rlenv::Kwargs& kwargs, const std::string& default_xml,
             int default_frame_skip);

  // Called by the constructor of the most derived task, once its kwargs
  // are read: sizes the observation and refuses kwargs no task field read.
  void Finish(const rlenv::Kwargs& kwargs);

  // A kwarg read by the task (and so accepted).
  double Param(const rlenv::Kwargs& kwargs, const std::string& key,
               double fallback);
  bool Flag(const rlenv::Kwargs& kwargs, const std::string& key, bool fallback);
  // [low, high], e.g. healthy_z_range.
  std::pair<double, double> Range(const rlenv::Kwargs& kwargs,
                                  const std::string& key,
                                  std::pair<double, double> fallback);

  // reset_model() before set_state: qpos and qvel from model()->qpos0 and
  // zeros, the task's noise added.
  virtual void ResetModel(mjData* d, Rng& rng) const = 0;
  // The task's reward and termination around do_simulation.
  virtual StepOutcome DoStep(mjData* d, const double* action) const = 0;
  virtual void ObserveInto(const mjData* d, double* obs) const = 0;

  // do_simulation: ctrl = action, mj_step frame_skip times,
  // mj_rnePostConstraint.
  void Simulate(mjData* d, const double* action) const;
  // Body id by name; throws if the model has none.
  int BodyId(const char* name) const;

  static double Uniform(Rng& rng, double low, double high);
  static double Normal(Rng& rng);

  ModelPtr model_;
  int frame_skip_ = 1;
  int observation_size_ = 0;

 private:
  std::vector<std::string> read_keys_;
};

// The ids served ("Ant-v5", "HalfCheetah-v5", ...), sorted.
const std::vector<std::string>& MujocoTaskIds();

// The task `id` names, built with `kwargs`. Throws std::invalid_argument
// for an unknown id (listing the known ones) or a bad kwarg.
std::unique_ptr<MujocoTask> MakeMujocoTask(const std::string& id,
                                           const rlenv::Kwargs& kwargs);

}  // namespace rl::mujoco_envs

#endif  // RL_ENVS_MUJOCO_MUJOCO_TASK_H_
