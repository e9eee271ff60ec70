// The one list of environment ids this service knows, and what can be said
// of each without its physics: spaces, action bounds and time limit. Run
// files are validated and resolved against it (runspec/), learners size
// their networks from it; only actors (and the one-process trainer) link the
// physics (envs/batched_env.h). env_registry_test checks every entry against
// the physics constants.
#ifndef RL_ENVS_ENV_REGISTRY_H_
#define RL_ENVS_ENV_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "envs/env_kind.h"
#include "proto/common.pb.h"

namespace rl {

// "CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
// "MountainCarContinuous-v0", in that order.
const std::vector<std::string>& RegisteredEnvIds();

// INVALID_ARGUMENT listing the known ids for an unknown one.
absl::StatusOr<EnvKind> FindEnvKind(absl::string_view id);

// The registered description: an EnvSpec with every field the service
// derives filled (Gymnasium's spaces, action bounds, reward range and time
// limit).
const EnvSpec& RegisteredEnv(EnvKind kind);

// Fills the fields of `env` that the service derives from its id (the
// spaces' sizes, the action bounds, the reward range, and max_episode_steps
// when 0), and env.resolved_fingerprint. Fields already filled must agree
// with the registry.
// INVALID_ARGUMENT naming the field ("env.observation_size: ...") for an
// unknown id or a disagreeing field. Only the coordinator and rl_local
// resolve (runspec/ResolveRunSpec); workers check (CheckResolvedEnvSpec).
absl::Status ResolveEnvSpec(EnvSpec* env);

// What a worker does with the spec it is given: OK if `env` is resolved
// (every derived field filled, as the registry says, and a time limit);
// else INVALID_ARGUMENT naming the field. Fills nothing in. A spec whose
// fingerprint matches it was resolved by the service and not changed since:
// it is taken without resolving again. One without a fingerprint (stored
// before them) or changed since is resolved again and compared.
absl::Status CheckResolvedEnvSpec(const EnvSpec& env);

// The fingerprint ResolveEnvSpec stores: a stable 64-bit hash (FNV-1a over
// the deterministic serialisation) of `env` with resolved_fingerprint 0,
// and of this binary's registry row for a built-in id. Never 0.
uint64_t EnvSpecFingerprint(const EnvSpec& env);

// The most elements one observation may have (a 4-frame 210x160 RGB
// stack is 403,200).
inline constexpr int64_t kMaxObservationElements = int64_t{1} << 22;

// The most parts of a Dict or Tuple observation (env.observation_parts).
inline constexpr int kMaxObservationParts = 64;

// Observations are uint8 (env.observation_dtype "uint8"), else float32.
bool ObservationsAreBytes(const EnvSpec& env);

// Bytes of one observation element: 1 for uint8, 4 for float32.
inline int64_t ObservationElementBytes(const EnvSpec& env) {
  return ObservationsAreBytes(env) ? 1 : 4;
}

// The shape of one observation: env.observation_shape, or
// {observation_size} when that is empty.
std::vector<int64_t> ObservationShape(const EnvSpec& env);

// Integer actions: Discrete (num_discrete_actions) or MultiDiscrete
// (action_nvec).
inline bool IsDiscrete(const EnvSpec& env) {
  return env.num_discrete_actions() > 0 || env.action_nvec_size() > 0;
}

inline bool IsMultiDiscrete(const EnvSpec& env) {
  return env.action_nvec_size() > 0;
}

// The choices of each part of an integer action: {num_discrete_actions}
// for Discrete, action_nvec for MultiDiscrete; empty for continuous.
std::vector<int64_t> DiscreteActionParts(const EnvSpec& env);

// Bytes of one action mask: the sum of DiscreteActionParts.
int64_t ActionMaskSize(const EnvSpec& env);

}  // namespace rl

#endif  // RL_ENVS_ENV_REGISTRY_H_
