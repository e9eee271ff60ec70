#include "envs/env_registry.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace rl {
namespace {

struct Entry {
  EnvKind kind;
  EnvSpec spec;
};

EnvSpec Spec(const char* id, int observation_size, int num_actions,
             int action_size, float action_low, float action_high,
             int max_episode_steps, float reward_low, float reward_high) {
  EnvSpec spec;
  spec.set_id(id);
  spec.set_observation_size(observation_size);
  spec.set_num_discrete_actions(num_actions);
  spec.set_continuous_action_size(action_size);
  spec.set_action_low(action_low);
  spec.set_action_high(action_high);
  spec.set_max_episode_steps(max_episode_steps);
  spec.set_reward_low(reward_low);
  spec.set_reward_high(reward_high);
  return spec;
}

// Gymnasium 1.0.0's spaces and time limits (checked against the physics
// headers by env_registry_test).
const std::vector<Entry>& Entries() {
  static const auto* entries = new std::vector<Entry>{
      // Rewards: CartPole 1 a step; Acrobot -1, 0 at the goal; MountainCar
      // -1; Pendulum -(theta^2 + 0.1 thdot^2 + 0.001 u^2) with |theta| <= pi,
      // |thdot| <= 8, |u| <= 2; MountainCarContinuous -0.1 a^2 of the action
      // as given (not clipped, as in Gymnasium: no lower bound), plus 100 at
      // the goal.
      {EnvKind::kCartPole,
       Spec("CartPole-v1", 4, 2, 0, 0.0f, 0.0f, 500, 0.0f, 1.0f)},
      {EnvKind::kAcrobot,
       Spec("Acrobot-v1", 6, 3, 0, 0.0f, 0.0f, 500, -1.0f, 0.0f)},
      {EnvKind::kMountainCar,
       Spec("MountainCar-v0", 2, 3, 0, 0.0f, 0.0f, 200, -1.0f, 0.0f)},
      {EnvKind::kPendulum,
       Spec("Pendulum-v1", 3, 0, 1, -2.0f, 2.0f, 200, -16.2736044f, 0.0f)},
      {EnvKind::kMountainCarContinuous,
       Spec("MountainCarContinuous-v0", 2, 0, 1, -1.0f, 1.0f, 999,
            -std::numeric_limits<float>::infinity(), 100.0f)},
  };
  return *entries;
}

absl::Status Disagrees(absl::string_view field, absl::string_view id,
                       double want, double got) {
  return absl::InvalidArgumentError(
      absl::StrCat("env.", field, ": ", id, " has ", want, " (got ", got, ")"));
}

}  // namespace

const std::vector<std::string>& RegisteredEnvIds() {
  static const auto* ids = [] {
    auto* out = new std::vector<std::string>;
    for (const Entry& e : Entries()) out->push_back(e.spec.id());
    return out;
  }();
  return *ids;
}

absl::StatusOr<EnvKind> FindEnvKind(absl::string_view id) {
  for (const Entry& e : Entries()) {
    if (e.spec.id() == id) return e.kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown environment id \"", id,
                   "\"; known ids: ", absl::StrJoin(RegisteredEnvIds(), ", ")));
}

const EnvSpec& RegisteredEnv(EnvKind kind) {
  for (const Entry& e : Entries()) {
    if (e.kind == kind) return e.spec;
  }
  static const EnvSpec* const none = new EnvSpec();
  return *none;
}

absl::Status ResolveEnvSpec(EnvSpec* env) {
  absl::StatusOr<EnvKind> kind = FindEnvKind(env->id());
  if (!kind.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.id: ", kind.status().message()));
  }
  const EnvSpec& want = RegisteredEnv(*kind);
  struct Field {
    const char* name;
    double want;
    double got;
  };
  for (const Field& f :
       {Field{"observation_size", static_cast<double>(want.observation_size()),
              static_cast<double>(env->observation_size())},
        Field{"num_discrete_actions",
              static_cast<double>(want.num_discrete_actions()),
              static_cast<double>(env->num_discrete_actions())},
        Field{"continuous_action_size",
              static_cast<double>(want.continuous_action_size()),
              static_cast<double>(env->continuous_action_size())},
        Field{"action_low", want.action_low(), env->action_low()},
        Field{"action_high", want.action_high(), env->action_high()},
        Field{"reward_low", want.reward_low(), env->reward_low()},
        Field{"reward_high", want.reward_high(), env->reward_high()}}) {
    if (f.got != 0 && f.got != f.want) {
      return Disagrees(f.name, want.id(), f.want, f.got);
    }
  }
  if (env->max_episode_steps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.max_episode_steps: must be >= 0 (got ",
                     env->max_episode_steps(), ")"));
  }
  const int max_episode_steps = env->max_episode_steps();
  *env = want;
  if (max_episode_steps > 0) env->set_max_episode_steps(max_episode_steps);
  return absl::OkStatus();
}

absl::Status CheckResolvedEnvSpec(const EnvSpec& env) {
  if (env.observation_size() == 0 || env.max_episode_steps() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env: the spec of \"", env.id(),
        "\" is not resolved (observation_size and max_episode_steps are "
        "filled in by the coordinator or rl_local; a worker takes them as "
        "given)"));
  }
  EnvSpec resolved = env;
  RETURN_IF_ERROR(ResolveEnvSpec(&resolved));
  // Every derived field was filled and agreed: resolving changed nothing.
  if (resolved.SerializeAsString() != env.SerializeAsString()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env: the spec of \"", env.id(), "\" lacks fields the registry fills ",
        "(resolved: ", resolved.ShortDebugString(),
        "; given: ", env.ShortDebugString(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace rl
