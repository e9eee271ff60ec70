// The structure-of-arrays state of E environments of one kind, and the
// per-environment step shared by the CPU loop and the CUDA kernel.
//
// Data flow of one step of environment i: state[k * E + i] -> Env::Step ->
// state, observation row i, reward, flags; if the episode ended, its final
// observation and return/length are written and the environment is reset
// from RandomStream(seed, i, episode) in the same step.
#ifndef RL_ENVS_ENV_BATCH_H_
#define RL_ENVS_ENV_BATCH_H_

#include <cstdint>

#include "common/host_device.h"
#include "envs/acrobot.h"
#include "envs/cartpole.h"
#include "envs/continuous_mountain_car.h"
#include "envs/env_kind.h"
#include "envs/mountain_car.h"
#include "envs/pendulum.h"
#include "envs/random_stream.h"

namespace rl {

// Calls f(Env{}) with the physics type of `kind`.
template <typename F>
inline void VisitEnvKind(EnvKind kind, F&& f) {
  switch (kind) {
    case EnvKind::kCartPole:
      f(CartPole{});
      return;
    case EnvKind::kAcrobot:
      f(Acrobot{});
      return;
    case EnvKind::kMountainCar:
      f(MountainCar{});
      return;
    case EnvKind::kPendulum:
      f(Pendulum{});
      return;
    case EnvKind::kMountainCarContinuous:
      f(MountainCarContinuous{});
      return;
  }
}

// Length of the physical state (Gymnasium's env.unwrapped.state).
inline int EnvStateSize(EnvKind kind) {
  int size = 0;
  VisitEnvKind(kind, [&](auto env) { size = decltype(env)::kStateSize; });
  return size;
}

// Per-environment arrays, all of num_envs entries except state, which is
// [state_size][num_envs]. CPU or device memory, as the caller's backend.
struct EnvBatch {
  double* state = nullptr;
  int32_t* elapsed = nullptr;   // steps in the current episode
  uint64_t* episode = nullptr;  // episodes begun, the random stream counter
  double* returns = nullptr;    // undiscounted return so far
  int64_t num_envs = 0;
  int32_t max_episode_steps = 0;
  uint64_t seed = 0;
};

// Plain-pointer twin of StepOutputs (batched_env.h), usable in device code.
struct StepBuffers {
  float* observations = nullptr;
  float* rewards = nullptr;
  uint8_t* terminated = nullptr;
  uint8_t* truncated = nullptr;
  float* final_observations = nullptr;
  float* episode_returns = nullptr;
  int32_t* episode_lengths = nullptr;
};

// Starts episode episode[i] + 1 of environment i; writes its first
// observation to `obs` unless null.
template <typename Env>
RL_HOST_DEVICE inline void ResetEnv(const EnvBatch& b, int64_t i, float* obs) {
  const uint64_t episode = b.episode[i] + 1;
  b.episode[i] = episode;
  double s[Env::kStateSize];
  Env::Sample(RandomStream(b.seed, static_cast<uint64_t>(i), episode), s);
  for (int k = 0; k < Env::kStateSize; ++k) b.state[k * b.num_envs + i] = s[k];
  b.elapsed[i] = 0;
  b.returns[i] = 0;
  if (obs != nullptr) Env::Observe(s, obs);
}

// The physics half of a step: state, observation, reward, flags. Returns
// whether the episode ended. Free of branches on the data where Env::Step
// is, so a loop over i vectorises.
template <typename Env>
RL_HOST_DEVICE inline bool StepEnvPhysics(const EnvBatch& b, int64_t i,
                                          const typename Env::Action* action,
                                          const StepBuffers& out) {
  const int64_t n = b.num_envs;
  double s[Env::kStateSize];
  for (int k = 0; k < Env::kStateSize; ++k) s[k] = b.state[k * n + i];
  const StepResult r = Env::Step(s, action);
  for (int k = 0; k < Env::kStateSize; ++k) b.state[k * n + i] = s[k];
  Env::Observe(s, out.observations + i * Env::kObsSize);
  const int32_t length = b.elapsed[i] + 1;
  b.elapsed[i] = length;
  b.returns[i] += r.reward;
  const bool truncated = !r.terminated & (length >= b.max_episode_steps);
  out.rewards[i] = r.reward;
  out.terminated[i] = r.terminated;
  out.truncated[i] = truncated;
  return r.terminated | truncated;
}

// The bookkeeping half, for an environment whose episode ended at this step:
// final observation, return and length, auto-reset.
template <typename Env>
RL_HOST_DEVICE inline void FinishEpisode(const EnvBatch& b, int64_t i,
                                         const StepBuffers& out) {
  float* obs = out.observations + i * Env::kObsSize;
  if (out.final_observations != nullptr) {
    float* final_obs = out.final_observations + i * Env::kObsSize;
    for (int k = 0; k < Env::kObsSize; ++k) final_obs[k] = obs[k];
  }
  if (out.episode_returns != nullptr) {
    out.episode_returns[i] = static_cast<float>(b.returns[i]);
  }
  if (out.episode_lengths != nullptr) out.episode_lengths[i] = b.elapsed[i];
  ResetEnv<Env>(b, i, obs);
}

// One whole step of environment i (the CUDA kernel's body; the CPU loop
// runs the two halves as separate passes).
template <typename Env>
RL_HOST_DEVICE inline void StepEnv(const EnvBatch& b, int64_t i,
                                   const typename Env::Action* action,
                                   const StepBuffers& out) {
  const bool done = StepEnvPhysics<Env>(b, i, action, out);
  if (out.episode_returns != nullptr) out.episode_returns[i] = 0;
  if (out.episode_lengths != nullptr) out.episode_lengths[i] = 0;
  if (done) FinishEpisode<Env>(b, i, out);
}

// CPU: steps environments [begin, end) of `b`. `actions` is int64 [E] for
// discrete kinds, float [E, action_size] for continuous ones; not validated
// here. Results of an environment do not depend on the range it is in.
void StepBatchCpu(EnvKind kind, const EnvBatch& b, const void* actions,
                  const StepBuffers& out, int64_t begin, int64_t end);

// CPU: resets environments [begin, end), writing observations [E, obs]
// (rows begin..end) unless null.
void ResetBatchCpu(EnvKind kind, const EnvBatch& b, float* observations,
                   int64_t begin, int64_t end);

}  // namespace rl

#endif  // RL_ENVS_ENV_BATCH_H_
