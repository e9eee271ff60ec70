#include "envs/env_registry.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rl {
namespace {

struct Entry {
  EnvKind kind;
  EnvInfo info;
};

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
       {"CartPole-v1", 4, 2, 0, 0.0f, 0.0f, 500, 0.0f, 1.0f}},
      {EnvKind::kAcrobot,
       {"Acrobot-v1", 6, 3, 0, 0.0f, 0.0f, 500, -1.0f, 0.0f}},
      {EnvKind::kMountainCar,
       {"MountainCar-v0", 2, 3, 0, 0.0f, 0.0f, 200, -1.0f, 0.0f}},
      {EnvKind::kPendulum,
       {"Pendulum-v1", 3, 0, 1, -2.0f, 2.0f, 200, -16.2736044f, 0.0f}},
      {EnvKind::kMountainCarContinuous,
       {"MountainCarContinuous-v0", 2, 0, 1, -1.0f, 1.0f, 999,
        -std::numeric_limits<float>::infinity(), 100.0f}},
  };
  return *entries;
}

absl::Status Disagrees(absl::string_view field, absl::string_view id, int want,
                       int got) {
  return absl::InvalidArgumentError(
      absl::StrCat("env.", field, ": ", id, " has ", want, " (got ", got, ")"));
}

}  // namespace

const std::vector<std::string>& RegisteredEnvIds() {
  static const auto* ids = [] {
    auto* out = new std::vector<std::string>;
    for (const Entry& e : Entries()) out->push_back(e.info.id);
    return out;
  }();
  return *ids;
}

absl::StatusOr<EnvKind> FindEnvKind(absl::string_view id) {
  for (const Entry& e : Entries()) {
    if (e.info.id == id) return e.kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown environment id \"", id,
                   "\"; known ids: ", absl::StrJoin(RegisteredEnvIds(), ", ")));
}

EnvInfo DescribeEnv(EnvKind kind) {
  for (const Entry& e : Entries()) {
    if (e.kind == kind) return e.info;
  }
  return EnvInfo{};
}

absl::Status ResolveEnvSpec(EnvSpec* env) {
  absl::StatusOr<EnvKind> kind = FindEnvKind(env->id());
  if (!kind.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.id: ", kind.status().message()));
  }
  const EnvInfo info = DescribeEnv(*kind);
  struct Field {
    const char* name;
    int want;
    int got;
  };
  for (const Field& f : {Field{"observation_size", info.observation_size,
                               env->observation_size()},
                         Field{"num_discrete_actions", info.num_actions,
                               env->num_discrete_actions()},
                         Field{"continuous_action_size", info.action_size,
                               env->continuous_action_size()}}) {
    if (f.got != 0 && f.got != f.want) {
      return Disagrees(f.name, info.id, f.want, f.got);
    }
  }
  if (env->max_episode_steps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.max_episode_steps: must be >= 0 (got ",
                     env->max_episode_steps(), ")"));
  }
  env->set_observation_size(info.observation_size);
  env->set_num_discrete_actions(info.num_actions);
  env->set_continuous_action_size(info.action_size);
  if (env->max_episode_steps() == 0) {
    env->set_max_episode_steps(info.max_episode_steps);
  }
  return absl::OkStatus();
}

absl::StatusOr<EnvInfo> DescribeEnvSpec(const EnvSpec& env) {
  EnvSpec resolved = env;
  if (absl::Status status = ResolveEnvSpec(&resolved); !status.ok()) {
    return status;
  }
  EnvInfo info = DescribeEnv(*FindEnvKind(resolved.id()));
  info.max_episode_steps = resolved.max_episode_steps();
  return info;
}

}  // namespace rl
