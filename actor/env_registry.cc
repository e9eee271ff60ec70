#include "actor/env_registry.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rl {
namespace {

constexpr EnvKind kAllKinds[] = {EnvKind::kCartPole, EnvKind::kAcrobot,
                                 EnvKind::kMountainCar, EnvKind::kPendulum,
                                 EnvKind::kMountainCarContinuous};

}  // namespace

std::vector<std::string> RegisteredEnvIds() {
  std::vector<std::string> ids;
  for (EnvKind kind : kAllKinds) ids.push_back(DescribeEnv(kind).id);
  return ids;
}

absl::StatusOr<EnvKind> FindEnvKind(absl::string_view id) {
  for (EnvKind kind : kAllKinds) {
    if (DescribeEnv(kind).id == id) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown environment id \"", id,
                   "\"; known ids: ", absl::StrJoin(RegisteredEnvIds(), ", ")));
}

EnvInfo DescribeEnv(EnvKind kind) {
  EnvInfo info;
  VisitEnvKind(kind, [&](auto env) {
    using Env = decltype(env);
    info.id = Env::kId;
    info.observation_size = Env::kObsSize;
    info.num_actions = Env::kNumActions;
    info.action_size = Env::kActionSize;
    info.action_low = Env::kActionLow;
    info.action_high = Env::kActionHigh;
    info.max_episode_steps = Env::kMaxEpisodeSteps;
  });
  return info;
}

int EnvStateSize(EnvKind kind) {
  int size = 0;
  VisitEnvKind(kind, [&](auto env) { size = decltype(env)::kStateSize; });
  return size;
}

}  // namespace rl
