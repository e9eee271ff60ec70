// A rollout segment as tensors: T steps of E environments, time-major
// [T, E, ...]. Actors fill it in place (the environments write straight into
// its rows); learners consume it. CPU tensors, allocated once and reused.
#ifndef RL_POLICY_ROLLOUT_H_
#define RL_POLICY_ROLLOUT_H_

#include <torch/types.h>

#include <array>

namespace rl {

struct Rollout {
  // [T, E, obs] float32, or uint8 (EnvSpec.observation_dtype): raw, before
  // each step.
  torch::Tensor observations;
  // [T, E] int64 (Discrete), [T, E, parts] int64 (MultiDiscrete) or
  // [T, E, A] float.
  torch::Tensor actions;
  torch::Tensor log_probs;         // [T, E] float
  torch::Tensor values;            // [T, E] float
  torch::Tensor rewards;           // [T, E] float (scaled if enabled)
  torch::Tensor terminated;        // [T, E] uint8
  torch::Tensor truncated;         // [T, E] uint8
  torch::Tensor truncated_values;  // [T, E] float: V(final obs) where truncated
  torch::Tensor next_observations;  // [E, obs]: after the last step
  torch::Tensor next_values;        // [E] float: V(next_observations)
  // [T, E, n] uint8, 1 = allowed: the action mask of observations[t];
  // undefined when the env writes none (EnvSpec.action_mask).
  torch::Tensor action_masks;
  // [E, S] float32: a recurrent policy's state before observations[0]
  // (already zeroed where an episode starts there); undefined without a
  // core. The state before step t > 0 follows from it: the policy's, zeroed
  // where step t - 1 ended an episode (terminated or truncated).
  torch::Tensor initial_state;
  // [T, E] uint8, 1 = the row's agent acts at step t; 0 = it left its game
  // early and step t is padding (no loss, statistic or episode counts it).
  // Undefined unless the env's agents may leave (EnvSpec.agents_leave).
  torch::Tensor alive;

  // Every tensor above, defined or not, in one order: what a copy of the
  // whole rollout copies.
  std::array<torch::Tensor*, 13> Tensors() {
    return {&observations, &actions,          &log_probs,
            &values,       &rewards,          &terminated,
            &truncated,    &truncated_values, &next_observations,
            &next_values,  &action_masks,     &initial_state,
            &alive};
  }

  // A copy on `device` (each defined tensor).
  Rollout To(torch::Device device) const {
    Rollout r = *this;
    for (torch::Tensor* t : r.Tensors()) {
      if (t->defined()) *t = t->to(device);
    }
    return r;
  }

  // The envs `rows` ([K] int64, on this rollout's device) of every tensor:
  // a rollout of K envs (copies, not views).
  Rollout Rows(const torch::Tensor& rows) const {
    Rollout r = *this;
    for (torch::Tensor* t : r.Tensors()) {
      if (!t->defined()) continue;
      // [E, ...] after the last step or before the first; else [T, E, ...].
      const bool env_major = t == &r.next_observations || t == &r.next_values ||
                             t == &r.initial_state;
      *t = t->index_select(env_major ? 0 : 1, rows);
    }
    return r;
  }

  int64_t num_steps() const { return rewards.size(0); }
  int64_t num_envs() const { return rewards.size(1); }

  // Zero-filled tensors for T x E steps; action_size 0 means discrete
  // (action_parts > 0: MultiDiscrete of that many parts); mask_size > 0:
  // action masks of that many bytes; observations of `observation_dtype`
  // (float32 or uint8); state_size > 0: a recurrent state of that many
  // numbers per env; alive: an alive flag per step (agents that leave).
  static Rollout Allocate(int64_t num_steps, int64_t num_envs,
                          int64_t observation_size, int64_t action_size,
                          int64_t mask_size = 0, int64_t action_parts = 0,
                          torch::Dtype observation_dtype = torch::kFloat32,
                          int64_t state_size = 0, bool alive = false) {
    Rollout r;
    const auto f = torch::kFloat32;
    r.observations = torch::zeros({num_steps, num_envs, observation_size},
                                  observation_dtype);
    r.actions =
        action_parts > 0
            ? torch::zeros({num_steps, num_envs, action_parts}, torch::kInt64)
        : action_size == 0
            ? torch::zeros({num_steps, num_envs}, torch::kInt64)
            : torch::zeros({num_steps, num_envs, action_size}, f);
    r.log_probs = torch::zeros({num_steps, num_envs}, f);
    r.values = torch::zeros({num_steps, num_envs}, f);
    r.rewards = torch::zeros({num_steps, num_envs}, f);
    r.terminated = torch::zeros({num_steps, num_envs}, torch::kUInt8);
    r.truncated = torch::zeros({num_steps, num_envs}, torch::kUInt8);
    r.truncated_values = torch::zeros({num_steps, num_envs}, f);
    r.next_observations =
        torch::zeros({num_envs, observation_size}, observation_dtype);
    r.next_values = torch::zeros({num_envs}, f);
    if (mask_size > 0) {
      r.action_masks =
          torch::zeros({num_steps, num_envs, mask_size}, torch::kUInt8);
    }
    if (state_size > 0)
      r.initial_state = torch::zeros({num_envs, state_size}, f);
    if (alive) r.alive = torch::ones({num_steps, num_envs}, torch::kUInt8);
    return r;
  }
};

}  // namespace rl

#endif  // RL_POLICY_ROLLOUT_H_
