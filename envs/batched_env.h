// Batched environments: E copies of one Gymnasium classic-control task,
// stepped together. State is structure-of-arrays (one array per state
// variable); one Step() advances all E environments.
//
// Data flow: actions [E] -> per-environment physics (a plain function, shared
// with the CUDA kernel) -> observations / rewards / flags written straight
// into caller-provided buffers (the rollout buffer), with auto-reset.
#ifndef RL_ENVS_BATCHED_ENV_H_
#define RL_ENVS_BATCHED_ENV_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "envs/env_registry.h"

namespace rl {

// Where one Step() writes; every pointer addresses E rows in CPU memory and
// must stay valid for the call. Row i belongs to environment i.
struct StepOutputs {
  // [E, obs] observation after the step; for an environment whose episode
  // ended at this step, the first observation of its next episode. Elements
  // of the spec's observation dtype: float32, or uint8 where
  // ObservationsAreBytes(spec()) (plugins only).
  void* observations = nullptr;
  // [E] reward of the step.
  float* rewards = nullptr;
  // [E] 1 if the episode ended in a terminal state at this step, else 0.
  uint8_t* terminated = nullptr;
  // [E] 1 if the episode was cut by the time limit (and not terminated).
  uint8_t* truncated = nullptr;
  // Optional ([E, obs]): for environments whose episode ended at this step,
  // the last observation of that episode (to bootstrap from on truncation);
  // other rows are left untouched. The observation dtype, as above.
  void* final_observations = nullptr;
  // Optional ([E]): where an episode ended at this step, its undiscounted
  // return and length; 0 elsewhere.
  float* episode_returns = nullptr;
  int32_t* episode_lengths = nullptr;
  // [E, num_discrete_actions], when the env writes action masks
  // (EnvSpec.action_mask): the mask of each row's new observation.
  uint8_t* action_masks = nullptr;
  // Optional ([E]): 1 where the row's agent is in its game for the new
  // observation, 0 where it left early and its environment plays on
  // (EnvSpec.agents_leave; rl_env_plugin.h, "Agents that leave early"). An
  // env whose agents never leave writes 1 everywhere.
  uint8_t* alive = nullptr;
};

class BatchedEnv {
 public:
  // The built-in classic-control batch of `id` (what the built-in plugin
  // table serves; envs/env_plugin.h's OpenEnv is how the service makes
  // environments). INVALID_ARGUMENT for an unknown id, num_envs < 1 or
  // num_threads < 1. max_episode_steps 0: the environment's registered limit.
  // The CPU backend splits the E environments across num_threads threads;
  // results do not depend on num_threads.
  static absl::StatusOr<std::unique_ptr<BatchedEnv>> Create(
      const std::string& id, int num_envs, uint64_t seed, int num_threads = 1,
      int max_episode_steps = 0);

  virtual ~BatchedEnv() = default;

  // The environment's resolved spec (spaces, bounds, reward range, the
  // time limit in effect).
  virtual const EnvSpec& spec() const = 0;
  virtual int num_envs() const = 0;

  // Resets every environment to a fresh random initial state (from the
  // per-environment counter-based random stream) and writes observations
  // [E, obs] (of the observation dtype, as StepOutputs says), and the
  // action masks [E, n] of an env that writes them. A plugin's failure is
  // FAILED_PRECONDITION with its reason.
  virtual absl::Status Reset(void* observations,
                             uint8_t* action_masks = nullptr) = 0;

  // Discrete environments take int64 actions [E] in [0, num_actions);
  // continuous ones take float actions [E, action_size] (finite; clipped to
  // the bounds exactly as Gymnasium does). INVALID_ARGUMENT naming the first
  // bad row for an out-of-range discrete action or a non-finite continuous
  // one, before any environment is stepped.
  virtual absl::Status StepDiscrete(const int64_t* actions,
                                    const StepOutputs& out) = 0;
  virtual absl::Status StepContinuous(const float* actions,
                                      const StepOutputs& out) = 0;

  // Golden tests: set environment `env`'s physical state (the variables of
  // Gymnasium's `env.unwrapped.state`, in its order, as float64) and its
  // elapsed-step counter to 0. INVALID_ARGUMENT for a wrong env index or
  // state size.
  virtual absl::Status SetState(int env, const double* state,
                                int state_size) = 0;
  virtual int state_size() const = 0;

  // Golden tests of open-loop unstable trajectories (CartPole balanced to
  // its time limit), which re-set the recorded state before every step: set
  // environment `env`'s elapsed-step counter after SetState zeroed it.
  // INVALID_ARGUMENT for a wrong env index or a count outside
  // [0, max_episode_steps).
  virtual absl::Status SetElapsedSteps(int env, int elapsed_steps) = 0;

  // Checkpoints: the batch's whole dynamic state (physics, elapsed steps,
  // episode counters, running episode returns and lengths) as bytes, and
  // back, so that a resumed run continues exactly. RestoreState gives
  // INVALID_ARGUMENT if the bytes do not fit this env id and batch size.
  virtual std::string SaveState() const = 0;
  virtual absl::Status RestoreState(const std::string& bytes) = 0;
  // After RestoreState where agents leave early (EnvSpec.agents_leave):
  // each row's alive [E] as the saved state left it (the caller keeps it
  // beside the state), so that the next step is checked against it. Envs
  // whose agents never leave ignore it.
  virtual void RestoreAlive(const uint8_t* alive) { (void)alive; }
};

}  // namespace rl

#endif  // RL_ENVS_BATCHED_ENV_H_
