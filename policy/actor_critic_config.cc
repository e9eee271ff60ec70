// The network's configuration: made from a run's spec, and checked
// (policy/actor_critic.h). Part of the actor_critic library.
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "policy/actor_critic.h"

namespace rl {

ActorCriticConfig RunNetworkConfig(const RunSpec& spec) {
  return MakeActorCriticConfig(spec.env(), spec.policy(), spec.ppo());
}

ActorCriticConfig MakeActorCriticConfig(const EnvSpec& env,
                                        const PolicyConfig& policy,
                                        const PPOConfig& ppo) {
  ActorCriticConfig config;
  config.observation_size = env.observation_size();
  config.num_actions = env.num_discrete_actions();
  config.action_size = env.continuous_action_size();
  config.action_nvec.assign(env.action_nvec().begin(), env.action_nvec().end());
  config.bernoulli = env.action_binary() > 0;
  config.head = policy.head();
  config.action_low = env.action_low();
  config.action_high = env.action_high();
  config.hidden_sizes.assign(policy.hidden_sizes().begin(),
                             policy.hidden_sizes().end());
  config.shared_trunk = policy.shared_trunk();
  config.initial_log_std = policy.initial_log_std();
  config.activation = policy.activation() == "relu"
                          ? ActorCriticConfig::Activation::kRelu
                          : ActorCriticConfig::Activation::kTanh;
  config.normalize_observations = ppo.normalize_observations();
  config.action_masks = env.action_mask();
  // As envs/env_registry.h's ObservationsAreBytes (policy/ sits below envs/).
  config.byte_observations = env.observation_dtype() == "uint8";
  // The run spec names the encoder (runspec/ fills the default); a stored
  // spec from before encoders is an MLP's.
  if (policy.encoder() == "nature_cnn" || policy.encoder() == "impala_cnn") {
    config.encoder = policy.encoder() == "nature_cnn"
                         ? ActorCriticConfig::Encoder::kNatureCnn
                         : ActorCriticConfig::Encoder::kImpalaCnn;
    std::vector<int64_t> shape(env.observation_shape().begin(),
                               env.observation_shape().end());
    config.channels_last = policy.image_layout() == "hwc";
    if (shape.size() == 3) {
      config.image_chw =
          config.channels_last
              ? std::vector<int64_t>{shape[2], shape[0], shape[1]}
              : shape;
    }
  }
  int64_t offset = 0;
  for (const ObservationPart& part : env.observation_parts()) {
    ActorCriticConfig::ObservationPart p;
    p.name = part.name();
    p.offset = offset;
    p.shape.assign(part.shape().begin(), part.shape().end());
    p.size = 1;
    for (const int64_t d : p.shape) p.size *= d;
    p.bytes = part.dtype() == "uint8";
    offset += p.size;
    config.observation_parts.push_back(std::move(p));
  }
  if (!config.observation_parts.empty()) {
    config.channels_last = policy.image_layout() == "hwc";
    config.image_chw.clear();
  }
  if (policy.core() == "lstm" || policy.core() == "gru") {
    config.core = policy.core() == "lstm" ? ActorCriticConfig::Core::kLstm
                                          : ActorCriticConfig::Core::kGru;
    config.core_size = policy.core_size() > 0 ? policy.core_size() : 128;
  }
  if (policy.central_value()) {
    config.central_value_agents = env.agents_per_env();
  }
  return config;
}

std::vector<int64_t> PartImageChw(
    const ActorCriticConfig::ObservationPart& part, bool channels_last) {
  const std::vector<int64_t>& s = part.shape;
  if (s.size() != 3) return {};
  return channels_last ? std::vector<int64_t>{s[2], s[0], s[1]} : s;
}

int64_t ActionMaskWidth(const ActorCriticConfig& config) {
  int64_t width = config.num_actions;
  for (const int64_t n : config.action_nvec) width += n;
  return width;
}

std::string EncoderName(ActorCriticConfig::Encoder encoder) {
  switch (encoder) {
    case ActorCriticConfig::Encoder::kNatureCnn:
      return "nature_cnn";
    case ActorCriticConfig::Encoder::kImpalaCnn:
      return "impala_cnn";
    case ActorCriticConfig::Encoder::kMlp:
      break;
  }
  return "mlp";
}

std::string CoreName(ActorCriticConfig::Core core) {
  switch (core) {
    case ActorCriticConfig::Core::kLstm:
      return "lstm";
    case ActorCriticConfig::Core::kGru:
      return "gru";
    case ActorCriticConfig::Core::kNone:
      break;
  }
  return "none";
}

int64_t RecurrentStateSize(const ActorCriticConfig& config) {
  if (config.core == ActorCriticConfig::Core::kNone) return 0;
  const std::unique_ptr<RecurrentCore> core =
      MakeRecurrentCore(CoreName(config.core));
  return core == nullptr ? 0 : core->StateSize(config.core_size);
}

absl::Status CheckActorCriticConfig(const ActorCriticConfig& config) {
  if (config.observation_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "observation_size must be >= 1 (got ", config.observation_size, ")"));
  }
  const bool multi = !config.action_nvec.empty();
  if (config.bernoulli && !multi) {
    return absl::InvalidArgumentError(
        "a Bernoulli head takes bits: action_nvec must hold them");
  }
  if (int(config.num_actions > 0) + int(config.action_size > 0) + int(multi) !=
          1 ||
      config.num_actions < 0 || config.action_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exactly one of num_actions (discrete), action_size (continuous) "
        "and action_nvec (MultiDiscrete) must be given (got ",
        config.num_actions, ", ", config.action_size, " and ",
        config.action_nvec.size(), " parts)"));
  }
  for (size_t i = 0; i < config.action_nvec.size(); ++i) {
    if (config.bernoulli && config.action_nvec[i] != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("a Bernoulli head takes bits: action_nvec[", i,
                       "] must be 2 (got ", config.action_nvec[i], ")"));
    }
    if (config.action_nvec[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("action_nvec[", i, "] must be >= 1 (got ",
                       config.action_nvec[i], ")"));
    }
  }
  for (size_t i = 0; i < config.hidden_sizes.size(); ++i) {
    if (config.hidden_sizes[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden_sizes[", i, "] must be >= 1 (got ",
                       config.hidden_sizes[i], ")"));
    }
  }
  if (config.core != ActorCriticConfig::Core::kNone && config.core_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("core_size must be >= 1 for a recurrent core (got ",
                     config.core_size, ")"));
  }
  // Beside a core (whose trunk is shared) the value head reads the copy's
  // core outputs instead.
  if (config.central_value_agents > 1 && config.shared_trunk &&
      config.core == ActorCriticConfig::Core::kNone) {
    return absl::InvalidArgumentError(
        "a central critic (central_value_agents) needs a value trunk of its "
        "own: not a shared trunk");
  }
  if (config.central_value_agents < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("central_value_agents must be >= 0 (got ",
                     config.central_value_agents, ")"));
  }
  if (!(config.observation_clip > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "observation_clip must be > 0 (got ", config.observation_clip, ")"));
  }
  RETURN_IF_ERROR(MakeActionHead(config).status());
  int64_t parts_size = 0;
  for (const auto& part : config.observation_parts) {
    int64_t size = 1;
    for (const int64_t d : part.shape) size *= d;
    if (part.shape.empty() || size != part.size || part.offset != parts_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "observation part ", part.name, ": its shape [",
          absl::StrJoin(part.shape, ", "), "], size ", part.size,
          " and offset ", part.offset, " do not follow the parts before"));
    }
    parts_size += size;
  }
  if (!config.observation_parts.empty() &&
      parts_size != config.observation_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the observation parts hold ", parts_size,
        " elements; observation_size is ", config.observation_size));
  }
  const bool cnn = config.encoder != ActorCriticConfig::Encoder::kMlp;
  if (cnn && !config.observation_parts.empty()) {
    bool images = false;
    for (const auto& part : config.observation_parts) {
      if (!part.image()) continue;
      images = true;
      const std::vector<int64_t> chw = PartImageChw(part, config.channels_last);
      if (config.encoder == ActorCriticConfig::Encoder::kNatureCnn &&
          (chw[1] < 36 || chw[2] < 36)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the Nature CNN needs images of at least 36x36 (observation part ",
            part.name, " is ", chw[1], "x", chw[2], ")"));
      }
    }
    if (!images) {
      return absl::InvalidArgumentError(
          "a CNN encoder reads images: no observation part is a uint8 image "
          "of 3 dimensions");
    }
  } else if (cnn) {
    const std::vector<int64_t>& chw = config.image_chw;
    if (chw.size() != 3 || chw[0] < 1 || chw[1] < 1 || chw[2] < 1 ||
        chw[0] * chw[1] * chw[2] != config.observation_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a CNN encoder reads images: image [C, H, W] must have 3 positive "
          "sizes whose product is observation_size ",
          config.observation_size, " (got [", absl::StrJoin(chw, ", "), "])"));
    }
    if (config.encoder == ActorCriticConfig::Encoder::kNatureCnn &&
        (chw[1] < 36 || chw[2] < 36)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the Nature CNN needs images of at least 36x36 (got ",
                       chw[1], "x", chw[2], ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace rl
