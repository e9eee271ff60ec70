// The kinds of policy every export format is checked on (testonly): one
// per head, encoder and core, with the inputs to compare them on.
#ifndef RL_POLICY_EXPORT_CASES_H_
#define RL_POLICY_EXPORT_CASES_H_

#include <torch/types.h>

#include <string>
#include <vector>

#include "policy/actor_critic.h"
#include "proto/common.pb.h"

namespace rl {

struct ExportCase {
  std::string name;
  ActorCriticConfig config;
  EnvSpec env;
};

inline EnvSpec ExportEnv(float low = 0, float high = 0) {
  EnvSpec env;
  env.set_id("Test-v0");
  env.set_action_low(low);
  env.set_action_high(high);
  return env;
}

inline std::vector<ExportCase> ExportCases() {
  std::vector<ExportCase> cases;
  {
    ExportCase c{"discrete_masked_normalized", {}, ExportEnv()};
    c.config.observation_size = 5;
    c.config.num_actions = 4;
    c.config.action_masks = true;
    c.config.normalize_observations = true;
    cases.push_back(c);
  }
  {
    ExportCase c{"continuous", {}, ExportEnv(-2, 2)};
    c.config.observation_size = 3;
    c.config.action_size = 2;
    c.config.normalize_observations = true;
    c.config.initial_log_std = -0.5f;
    cases.push_back(c);
  }
  {
    ExportCase c{"multi_discrete_relu_shared", {}, ExportEnv()};
    c.config.observation_size = 4;
    c.config.action_nvec = {3, 2};
    c.config.action_masks = true;
    c.config.shared_trunk = true;
    c.config.activation = ActorCriticConfig::Activation::kRelu;
    cases.push_back(c);
  }
  {
    ExportCase c{"multi_binary_masked", {}, ExportEnv()};
    c.config.observation_size = 4;
    c.config.action_nvec = {2, 2, 2};
    c.config.bernoulli = true;
    c.config.action_masks = true;
    cases.push_back(c);
  }
  {
    ExportCase c{"nature_cnn_hwc", {}, ExportEnv()};
    c.config.encoder = ActorCriticConfig::Encoder::kNatureCnn;
    c.config.image_chw = {2, 36, 40};
    c.config.channels_last = true;
    c.config.observation_size = 2 * 36 * 40;
    c.config.byte_observations = true;
    c.config.hidden_sizes = {};
    c.config.num_actions = 6;
    for (int d : {36, 40, 2}) c.env.add_observation_shape(d);
    cases.push_back(c);
  }
  {
    ExportCase c{"impala_cnn_chw", {}, ExportEnv(-1, 1)};
    c.config.encoder = ActorCriticConfig::Encoder::kImpalaCnn;
    c.config.image_chw = {3, 9, 7};
    c.config.observation_size = 3 * 9 * 7;
    c.config.byte_observations = true;
    c.config.hidden_sizes = {16};
    c.config.action_size = 2;
    cases.push_back(c);
  }
  {
    // A Dict observation read per key: an HWC image part (bytes as floats)
    // through its own CNN, two float parts as they are.
    ExportCase c{"dict_per_key", {}, ExportEnv()};
    c.config.encoder = ActorCriticConfig::Encoder::kImpalaCnn;
    c.config.channels_last = true;
    c.config.observation_parts = {{"flip", 0, 2, {2}, false},
                                  {"image", 2, 8 * 6 * 2, {8, 6, 2}, true},
                                  {"speed", 2 + 96, 3, {3}, false}};
    c.config.observation_size = 2 + 96 + 3;
    c.config.hidden_sizes = {16};
    c.config.action_nvec = {2, 3};
    c.config.normalize_observations = true;
    cases.push_back(c);
  }
  {
    ExportCase c{"lstm_masked", {}, ExportEnv()};
    c.config.observation_size = 4;
    c.config.num_actions = 3;
    c.config.action_masks = true;
    c.config.hidden_sizes = {8};
    c.config.core = ActorCriticConfig::Core::kLstm;
    c.config.core_size = 6;
    cases.push_back(c);
  }
  {
    ExportCase c{"gru_continuous", {}, ExportEnv(-1, 1)};
    c.config.observation_size = 3;
    c.config.action_size = 2;
    c.config.normalize_observations = true;
    c.config.core = ActorCriticConfig::Core::kGru;
    c.config.core_size = 5;
    cases.push_back(c);
  }
  {
    // A central critic: each value reads both agents of its copy (the
    // inputs' rows in pairs).
    ExportCase c{"central_value", {}, ExportEnv()};
    c.config.observation_size = 5;
    c.config.num_actions = 3;
    c.config.normalize_observations = true;
    c.config.hidden_sizes = {8, 8};
    c.config.central_value_agents = 2;
    cases.push_back(c);
  }
  {
    // A central critic beside a core: each value reads both agents' core
    // outputs.
    ExportCase c{"central_gru", {}, ExportEnv()};
    c.config.observation_size = 5;
    c.config.num_actions = 3;
    c.config.hidden_sizes = {8};
    c.config.core = ActorCriticConfig::Core::kGru;
    c.config.core_size = 6;
    c.config.central_value_agents = 2;
    cases.push_back(c);
  }
  {
    ExportCase c{"tanh_gaussian", {}, ExportEnv(-2, 1)};
    c.config.observation_size = 3;
    c.config.action_size = 2;
    c.config.head = "tanh_gaussian";
    c.config.initial_log_std = -0.5f;
    cases.push_back(c);
  }
  // The action bounds as MakeActorCriticConfig takes them from the env.
  for (ExportCase& c : cases) {
    c.config.action_low = c.env.action_low();
    c.config.action_high = c.env.action_high();
  }
  return cases;
}

// 1,000 observations (and masks) of `c`'s kinds (500 copies of 2 agents
// for a central critic).
inline std::vector<torch::Tensor> ExportInputs(const ActorCriticConfig& c) {
  torch::manual_seed(7);
  const int64_t n = 1000;
  std::vector<torch::Tensor> inputs = {
      c.byte_observations
          ? torch::randint(0, 256, {n, c.observation_size}, torch::kUInt8)
          : torch::randn({n, c.observation_size}) * 3};
  if (c.action_masks) {
    int64_t size = c.num_actions;
    for (int64_t k : c.action_nvec) size += k;
    torch::Tensor masks = torch::randint(0, 2, {n, size}, torch::kUInt8);
    // At least one choice of every part allowed, at random (for bits:
    // either value forced where the other is masked).
    const std::vector<int64_t> parts = c.action_nvec.empty()
                                           ? std::vector<int64_t>{c.num_actions}
                                           : c.action_nvec;
    int64_t at = 0;
    for (const int64_t k : parts) {
      const torch::Tensor pick = torch::randint(0, k, {n}, torch::kInt64);
      masks.narrow(1, at, k).scatter_(1, pick.unsqueeze(1), 1);
      at += k;
    }
    inputs.push_back(masks);
  }
  return inputs;
}

}  // namespace rl

#endif  // RL_POLICY_EXPORT_CASES_H_
