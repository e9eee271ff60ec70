#include "policy/actor_critic.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "policy/network_layers.h"
#include "policy/torch_status.h"

namespace rl {

ActorCriticImpl::ActorCriticImpl(const ActorCriticConfig& config)
    : config_(config) {
  // One trunk feeds a core.
  if (recurrent()) config_.shared_trunk = true;
  // What the trunks take: the observation, or the CNN's features.
  int64_t trunk_in = config.observation_size;
  if (config.encoder != ActorCriticConfig::Encoder::kMlp) {
    image_encoder_ = MakeImageEncoder(EncoderName(config.encoder));
    TORCH_CHECK(image_encoder_ != nullptr, "no image encoder is named ",
                EncoderName(config.encoder));
  }
  if (image_encoder_ && !config.observation_parts.empty()) {
    // Per key: the image parts' features and the other parts' values.
    trunk_in = 0;
    for (size_t k = 0; k < config.observation_parts.size(); ++k) {
      const ActorCriticConfig::ObservationPart& part =
          config.observation_parts[k];
      if (!part.image()) {
        part_encoders_.emplace_back(nullptr);
        trunk_in += part.size;
        continue;
      }
      int64_t features = 0;
      part_encoders_.push_back(register_module(
          absl::StrCat("encoder_", k),
          image_encoder_->Make(PartImageChw(part, config.channels_last),
                               &features)));
      trunk_in += features;
    }
  } else if (image_encoder_) {
    encoder_ = register_module(
        "encoder", image_encoder_->Make(config.image_chw, &trunk_in));
  }
  int features = config.hidden_sizes.empty() ? static_cast<int>(trunk_in)
                                             : config.hidden_sizes.back();
  if (recurrent()) {
    core_ = MakeRecurrentCore(CoreName(config.core));
    TORCH_CHECK(core_ != nullptr, "no recurrent core is named ",
                CoreName(config.core));
    core_->Register(*this, features, config.core_size);
    features = config.core_size;
  }
  policy_trunk_ = register_module(
      "policy_trunk",
      MakeTrunk(trunk_in, config.hidden_sizes, config.activation));
  // A central critic's value trunk reads every agent's features.
  const int64_t central = std::max<int64_t>(1, config.central_value_agents);
  const int64_t value_in = trunk_in * central;
  if (!config_.shared_trunk) {
    value_trunk_ = register_module(
        "value_trunk",
        MakeTrunk(value_in, config.hidden_sizes, config.activation));
  }
  // A central critic's value head reads CentralInput itself without hidden
  // layers, and with a core that of the copy's core outputs (each agent's
  // summary of its own history).
  const int64_t value_features = recurrent() ? features * central
                                 : config.hidden_sizes.empty() ? value_in
                                                               : features;
  absl::StatusOr<std::unique_ptr<ActionHead>> head = MakeActionHead(config);
  TORCH_CHECK(head.ok(), std::string(head.status().message()));
  head_ = std::move(*head);
  // Small policy-head gain: near-uniform initial policy (common PPO practice).
  policy_head_ = register_module(
      "policy_head", OrthogonalLinear(features, head_->units(), 0.01));
  value_head_ =
      register_module("value_head", OrthogonalLinear(value_features, 1, 1.0));
  head_->Register(*this);
  obs_mean_ =
      register_buffer("obs_mean", torch::zeros({config.observation_size}));
  obs_var_ = register_buffer("obs_var", torch::ones({config.observation_size}));
  obs_count_ =
      register_buffer("obs_count", torch::full({}, 1e-4, torch::kFloat64));
  if (!config.byte_observations) {
    torch::Tensor scale = torch::ones({config.observation_size});
    bool bytes = false;
    for (const auto& part : config.observation_parts) {
      if (!part.bytes) continue;
      scale.narrow(0, part.offset, part.size).fill_(1.0f / 255.0f);
      bytes = true;
    }
    if (bytes) obs_scale_ = register_buffer("obs_scale", scale);
  }
}

torch::Tensor ActorCriticImpl::FloatObservations(
    const torch::Tensor& observations) const {
  if (observations.scalar_type() == torch::kUInt8) {
    return observations.to(torch::kFloat32) * (1.0f / 255.0f);
  }
  if (obs_scale_.defined()) return observations * obs_scale_;
  return observations;
}

torch::Tensor ActorCriticImpl::NormalizeObservations(
    const torch::Tensor& observations) const {
  const torch::Tensor x = FloatObservations(observations);
  if (!config_.normalize_observations) return x;
  return ((x - obs_mean_) * torch::rsqrt(obs_var_ + 1e-8))
      .clamp(-config_.observation_clip, config_.observation_clip);
}

namespace {

// Flat images [B, C * H * W] (laid out HWC where `channels_last`) as
// [B, C, H, W].
torch::Tensor Images(const torch::Tensor& flat, const std::vector<int64_t>& chw,
                     bool channels_last) {
  const int64_t batch = flat.size(0);
  return channels_last ? flat.reshape({batch, chw[1], chw[2], chw[0]})
                             .permute({0, 3, 1, 2})
                             .contiguous()
                       : flat.reshape({batch, chw[0], chw[1], chw[2]});
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> ActorCriticImpl::Trunks(
    const torch::Tensor& observations) {
  torch::Tensor x = observations;
  if (encoder_) {
    x = encoder_->forward(
        Images(observations, config_.image_chw, config_.channels_last));
  } else if (per_key()) {
    std::vector<torch::Tensor> features;
    for (size_t k = 0; k < part_encoders_.size(); ++k) {
      const auto& part = config_.observation_parts[k];
      const torch::Tensor values =
          observations.narrow(1, part.offset, part.size);
      features.push_back(
          part_encoders_[k]
              ? part_encoders_[k]->forward(
                    Images(values, PartImageChw(part, config_.channels_last),
                           config_.channels_last))
              : values);
    }
    x = torch::cat(features, 1);
  }
  // No hidden layers (a CNN's default): the features themselves.
  auto trunk = [&](torch::nn::Sequential& t) {
    return t->is_empty() ? x : t->forward(x);
  };
  const torch::Tensor policy = trunk(policy_trunk_);
  if (config_.shared_trunk) return {policy, policy};
  if (config_.central_value_agents > 1) {
    x = CentralInput(x, config_.central_value_agents);
  }
  return {policy, trunk(value_trunk_)};
}

torch::Tensor CentralInput(const torch::Tensor& features, int64_t agents) {
  const int64_t batch = features.size(0);
  TORCH_CHECK(agents >= 1 && batch % agents == 0,
              "a central critic (policy.central_value) values whole copies "
              "of ",
              agents, " agents: a batch of ", batch, " rows is not");
  // order[k] = k, k + 1, ..., k - 1 (mod agents).
  const torch::Tensor order =
      (torch::arange(agents).unsqueeze(1) + torch::arange(agents)) % agents;
  return features.reshape({batch / agents, agents, -1})
      .index_select(1, order.reshape({-1}).to(features.device()))
      .reshape({batch, -1});
}

torch::Tensor CentralTruncatedValues(ActorCriticImpl& policy,
                                     const Rollout& rollout,
                                     const torch::Tensor& final_observations,
                                     const torch::Tensor& step_states) {
  torch::NoGradGuard no_grad;
  const int64_t T = rollout.num_steps(), E = rollout.num_envs();
  const torch::Tensor after =
      torch::cat({rollout.observations.narrow(0, 1, T - 1),
                  rollout.next_observations.unsqueeze(0)},
                 0);
  const torch::Tensor truncated =
      rollout.truncated.to(after.device()).to(torch::kBool);
  // An agent whose episode ended at the step (either way) is at its final
  // observation; observations[t + 1] is already its next episode's.
  const torch::Tensor ended =
      truncated | rollout.terminated.to(after.device()).to(torch::kBool);
  const torch::Tensor observed =
      torch::where(ended.unsqueeze(2), final_observations.to(after.device()),
                   after)
          .reshape({T * E, -1});
  // With a core, each row from the state its step left.
  TORCH_CHECK(policy.recurrent() == step_states.defined(),
              "CentralTruncatedValues: step states are given exactly for a "
              "recurrent policy");
  TORCH_CHECK(!step_states.defined() ||
                  step_states.sizes() ==
                      torch::IntArrayRef({T, E, policy.state_size()}),
              "CentralTruncatedValues: step states of ", step_states.sizes(),
              " for ", T, " x ", E, " rows of state ", policy.state_size());
  const torch::Tensor states =
      policy.recurrent() ? step_states.reshape({T * E, -1}) : torch::Tensor();
  const auto rows_of = [](const torch::Tensor& t, const torch::Tensor& rows) {
    return t.defined() ? t.index_select(0, rows.to(t.device())) : t;
  };
  torch::Tensor values;
  if (!after.is_cpu()) {
    // On a device every row (finding the few would synchronise again).
    values = policy.Value(observed, states).reshape({T, E});
  } else {
    // On the host only the copies with a truncated agent (in Simple
    // Spread 2 steps of a segment's 50): whole copies, in row order.
    const int64_t agents = std::max(1, policy.config().central_value_agents);
    TORCH_CHECK(E % agents == 0, "a central critic (policy.central_value) ",
                "values whole copies of ", agents, " agents: ", E,
                " environments are not");
    const torch::Tensor rows = truncated.reshape({T, E / agents, agents})
                                   .any(2, /*keepdim=*/true)
                                   .expand({T, E / agents, agents})
                                   .reshape({T * E})
                                   .nonzero()
                                   .squeeze(1);
    values = torch::zeros({T * E}, torch::kFloat32);
    if (rows.numel() > 0) {
      values.index_copy_(
          0, rows,
          policy.Value(observed.index_select(0, rows), rows_of(states, rows))
              .to(torch::kCPU, torch::kFloat32));
    }
    // On the policy's device, as the other branch's.
    values = values.reshape({T, E}).to(policy.device());
  }
  return torch::where(truncated.to(values.device()), values,
                      torch::zeros_like(values));
}

torch::Tensor ActorCriticImpl::CoreValueFeatures(const torch::Tensor& core) {
  return config_.central_value_agents > 1
             ? CentralInput(core, config_.central_value_agents)
             : core;
}

torch::Tensor ActorCriticImpl::PolicyHead(const torch::Tensor& features) {
  return policy_head_->forward(features);
}

torch::Tensor RandomActionMasks(const ActorCriticConfig& config, int64_t batch,
                                double allowed, at::Generator& generator) {
  torch::Tensor masks =
      (torch::rand({batch, ActionMaskWidth(config)}, generator) < allowed)
          .to(torch::kUInt8);
  masks.select(1, 0).fill_(1);
  int64_t offset = 0;
  for (const int64_t n : config.action_nvec) {
    masks.select(1, offset).fill_(1);
    offset += n;
  }
  return masks;
}

torch::Tensor ActorCriticImpl::InitialState(int64_t batch) const {
  if (!recurrent()) return torch::Tensor();
  return torch::zeros({batch, state_size()});
}

torch::Tensor ActorCriticImpl::CoreStep(const torch::Tensor& features,
                                        const torch::Tensor& state,
                                        torch::Tensor* next_state) {
  return core_->Step(core_->Input(features), state, next_state);
}

namespace {

// `t` on `device` (itself where it is there already, or undefined).
torch::Tensor On(const torch::Tensor& t, torch::Device device) {
  return t.defined() && t.device() != device ? t.to(device) : t;
}

}  // namespace

PolicyStep ActorCriticImpl::Act(const torch::Tensor& observations,
                                c10::optional<at::Generator> generator,
                                bool deterministic,
                                const torch::Tensor& masks_anywhere,
                                torch::Tensor* state) {
  // Inputs from anywhere (the host's env buffers, say) to the policy's
  // device; the outputs stay there, and a recurrent state goes back to
  // where the caller keeps it.
  const torch::Device device = this->device();
  const torch::Tensor action_masks = On(masks_anywhere, device);
  auto [policy_features, value_features] =
      Trunks(NormalizeObservations(On(observations, device)));
  if (recurrent()) {
    TORCH_CHECK(state != nullptr && state->defined(),
                "a recurrent policy acts from a state (ActorCritic::Act)");
    torch::Tensor next;
    policy_features = CoreStep(policy_features, On(*state, device), &next);
    value_features = CoreValueFeatures(policy_features);
    *state = On(next, state->device());
  }
  HeadSample sample = head_->Sample(PolicyHead(policy_features), action_masks,
                                    generator, deterministic);
  PolicyStep step;
  step.actions = std::move(sample.actions);
  step.log_probs = std::move(sample.log_probs);
  step.values = value_head_->forward(value_features).squeeze(-1);
  return step;
}

torch::Tensor ActorCriticImpl::Value(const torch::Tensor& observations,
                                     const torch::Tensor& state) {
  const torch::Device device = this->device();
  torch::Tensor features =
      Trunks(NormalizeObservations(On(observations, device))).second;
  if (recurrent()) {
    TORCH_CHECK(state.defined(),
                "a recurrent policy values from a state (ActorCritic::Value)");
    torch::Tensor next;
    features = CoreValueFeatures(CoreStep(features, On(state, device), &next));
  }
  return value_head_->forward(features).squeeze(-1);
}

PolicyEvaluation ActorCriticImpl::Evaluate(const torch::Tensor& observations,
                                           const torch::Tensor& actions,
                                           const torch::Tensor& action_masks) {
  TORCH_CHECK(!recurrent(),
              "a recurrent policy evaluates whole sequences "
              "(ActorCritic::EvaluateSequence)");
  const auto [policy_features, value_features] =
      Trunks(NormalizeObservations(observations));
  return EvaluateHeads(policy_features, value_features, actions, action_masks);
}

PolicyEvaluation ActorCriticImpl::EvaluateSequence(
    const torch::Tensor& observations, const torch::Tensor& actions,
    const torch::Tensor& action_masks, const torch::Tensor& initial_state,
    const torch::Tensor& episode_ends) {
  const int64_t T = observations.size(0), B = observations.size(1);
  TORCH_CHECK(B % std::max(1, config_.central_value_agents) == 0,
              "a central critic (policy.central_value) values whole copies "
              "of ",
              config_.central_value_agents, " agents: ", B,
              " env sequences are not");
  const auto flat = [&](const torch::Tensor& t) {
    if (!t.defined()) return t;
    std::vector<int64_t> shape = {T * B};
    for (int64_t d = 2; d < t.dim(); ++d) shape.push_back(t.size(d));
    return t.reshape(shape);
  };
  if (!recurrent()) {
    return Evaluate(flat(observations), flat(actions), flat(action_masks));
  }
  // The trunk and the core's input projection over every step at once; the
  // recurrence step by step, as CoreStep computes it.
  // unbind, not xw[t]: one backward node for all the steps (a select's
  // backward would write a whole [T, B, gates] gradient per step).
  const std::vector<torch::Tensor> xw =
      core_->Input(Trunks(NormalizeObservations(flat(observations))).first)
          .view({T, B, -1})
          .unbind(0);
  // 1 where the state carries on to the next step, 0 where it restarts;
  // the steps after which no episode ended skip the product.
  const torch::Tensor carry =
      (1 - episode_ends.to(torch::kFloat32)).unsqueeze(-1);
  const torch::Tensor any_end =
      episode_ends.ne(0).any(1).to(torch::kCPU).contiguous();
  const bool* ended = any_end.data_ptr<bool>();
  torch::Tensor state = initial_state;
  std::vector<torch::Tensor> outputs;
  outputs.reserve(T);
  for (int64_t t = 0; t < T; ++t) {
    if (t > 0 && ended[t - 1]) state = state * carry[t - 1];
    outputs.push_back(core_->Step(xw[t], state, &state));
  }
  const torch::Tensor core = torch::cat(outputs, 0);  // [T * B, core_size]
  // Time-major, so each step's B rows hold its whole copies.
  return EvaluateHeads(core, CoreValueFeatures(core), flat(actions),
                       flat(action_masks));
}

PolicyEvaluation ActorCriticImpl::EvaluateHeads(
    const torch::Tensor& policy_features, const torch::Tensor& value_features,
    const torch::Tensor& actions, const torch::Tensor& action_masks) {
  HeadScore score =
      head_->Score(PolicyHead(policy_features), actions, action_masks);
  PolicyEvaluation eval;
  eval.log_probs = std::move(score.log_probs);
  eval.entropy = std::move(score.entropy);
  eval.values = value_head_->forward(value_features).squeeze(-1);
  return eval;
}

}  // namespace rl
