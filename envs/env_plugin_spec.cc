// What a plugin declares (rl_env_info) checked against the run's env spec,
// and the spec's settings the loader hands a plugin: its kwargs as JSON,
// its call timeout. The loading itself is env_plugin.cc's.
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "envs/call_watch.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "envs/space_parts.h"
#include "google/protobuf/util/json_util.h"

namespace rl {

absl::Status CheckPluginInfo(const rl_env_info& info, const EnvSpec& spec,
                             const std::string& origin) {
  auto disagree = [&](const std::string& what) {
    return absl::FailedPreconditionError(
        absl::StrCat("environment plugin ", origin,
                     " declares spaces that disagree with "
                     "the run's env spec: ",
                     what));
  };
  const rl_space& obs = info.observation;
  if (obs.rank < 0 || obs.rank > RL_ENV_MAX_RANK || info.action.rank < 0 ||
      info.action.rank > RL_ENV_MAX_RANK) {
    return disagree("a space's rank is outside [0, 8]");
  }
  if (obs.kind != RL_SPACE_BOX ||
      (obs.dtype != RL_DTYPE_FLOAT32 && obs.dtype != RL_DTYPE_UINT8)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "environment plugin ", origin, ": its observation space ",
        DescribeSpace(obs),
        " is not supported (observations are a Box of float32 or uint8)"));
  }
  if (ObservationsAreBytes(spec) && obs.dtype != RL_DTYPE_UINT8) {
    return disagree(absl::StrCat("observation ", DescribeSpace(obs),
                                 ", env.observation_dtype is uint8"));
  }
  if (spec.observation_shape_size() > 0) {
    const std::vector<int64_t> want = ObservationShape(spec);
    if (obs.rank != static_cast<int32_t>(want.size()) ||
        !std::equal(want.begin(), want.end(), obs.shape)) {
      return disagree(absl::StrCat("observation ", DescribeSpace(obs),
                                   ", env.observation_shape is [",
                                   absl::StrJoin(want, ", "), "]"));
    }
  } else if (SpaceElements(obs) != spec.observation_size()) {
    return disagree(absl::StrCat(
        "observation ", DescribeSpace(obs), " has ", SpaceElements(obs),
        " elements, env.observation_size is ", spec.observation_size()));
  }
  const rl_space& act = info.action;
  if (IsMultiDiscrete(spec)) {
    // MultiDiscrete with the same counts, or MultiBinary of as many parts
    // of 2.
    const std::vector<int64_t> parts = DiscreteActionParts(spec);
    bool same = false;
    if (act.kind == RL_SPACE_MULTI_DISCRETE && act.rank == 1 &&
        act.shape[0] == static_cast<int64_t>(parts.size()) &&
        act.nvec != nullptr) {
      same = std::equal(parts.begin(), parts.end(), act.nvec);
    } else if (act.kind == RL_SPACE_MULTI_BINARY &&
               SpaceElements(act) == static_cast<int64_t>(parts.size())) {
      same = std::all_of(parts.begin(), parts.end(),
                         [](int64_t p) { return p == 2; });
    }
    if (!same) {
      return disagree(absl::StrCat("action ", DescribeSpace(act),
                                   ", env.action_nvec is [",
                                   absl::StrJoin(parts, ", "), "]"));
    }
  } else if (IsDiscrete(spec)) {
    if (act.kind != RL_SPACE_DISCRETE || act.rank != 1 ||
        act.shape[0] != spec.num_discrete_actions()) {
      return disagree(absl::StrCat("action ", DescribeSpace(act),
                                   ", env.num_discrete_actions is ",
                                   spec.num_discrete_actions()));
    }
  } else {
    if (act.kind != RL_SPACE_BOX || act.dtype != RL_DTYPE_FLOAT32 ||
        SpaceElements(act) != spec.continuous_action_size()) {
      return disagree(absl::StrCat("action ", DescribeSpace(act),
                                   ", env.continuous_action_size is ",
                                   spec.continuous_action_size()));
    }
    for (int64_t k = 0; k < SpaceElements(act); ++k) {
      const double low = act.low != nullptr ? act.low[k] : -INFINITY;
      const double high = act.high != nullptr ? act.high[k] : INFINITY;
      if (static_cast<float>(low) != spec.action_low() ||
          static_cast<float>(high) != spec.action_high()) {
        return disagree(
            absl::StrCat("action element ", k, " has bounds [", low, ", ", high,
                         "], env.action_low/action_high are [",
                         spec.action_low(), ", ", spec.action_high(), "]"));
      }
    }
  }
  if ((info.has_action_mask != 0) != spec.action_mask()) {
    return disagree(info.has_action_mask != 0
                        ? "it writes action masks; declare env.action_mask: "
                          "true (a masked action is then never taken)"
                        : "env.action_mask is true, and it writes none");
  }
  // Compared as float32, the precision of the spec and of rewards. A
  // plugin that cannot know its range (the Gymnasium bridge) declares
  // (-inf, inf): the run's declared range holds, checked at every step.
  const bool unknown = std::isinf(info.reward_low) && info.reward_low < 0 &&
                       std::isinf(info.reward_high) && info.reward_high > 0;
  if (!unknown &&
      !(static_cast<float>(info.reward_low) >= spec.reward_low() &&
        static_cast<float>(info.reward_high) <= spec.reward_high())) {
    return disagree(absl::StrCat(
        "its rewards lie in [", info.reward_low, ", ", info.reward_high,
        "], outside env.reward_low/reward_high [", spec.reward_low(), ", ",
        spec.reward_high(), "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> KwargsJson(const EnvSpec& spec) {
  if (spec.kwargs().fields_size() == 0) return std::string("{}");
  std::string kwargs;  // MessageToJsonString appends
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(spec.kwargs(), &kwargs,
                                                   print)
           .ok()) {
    return absl::InvalidArgumentError("env.kwargs: cannot write as JSON");
  }
  return kwargs;
}

absl::Duration EnvCallTimeout(const EnvSpec& spec) {
  return absl::Seconds(spec.call_timeout_s() > 0
                           ? spec.call_timeout_s()
                           : kDefaultEnvCallTimeoutSeconds);
}

}  // namespace rl
