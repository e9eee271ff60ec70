#include "policy/policy_export.h"

#include <torch/script.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string name;
  ActorCriticConfig config;
  EnvSpec env;
};

EnvSpec Env(float low = 0, float high = 0) {
  EnvSpec env;
  env.set_id("Test-v0");
  env.set_action_low(low);
  env.set_action_high(high);
  return env;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  {
    Case c{"discrete_masked_normalized", {}, Env()};
    c.config.observation_size = 5;
    c.config.num_actions = 4;
    c.config.action_masks = true;
    c.config.normalize_observations = true;
    cases.push_back(c);
  }
  {
    Case c{"continuous", {}, Env(-2, 2)};
    c.config.observation_size = 3;
    c.config.action_size = 2;
    c.config.normalize_observations = true;
    c.config.initial_log_std = -0.5f;
    cases.push_back(c);
  }
  {
    Case c{"multi_discrete_relu_shared", {}, Env()};
    c.config.observation_size = 4;
    c.config.action_nvec = {3, 2};
    c.config.action_masks = true;
    c.config.shared_trunk = true;
    c.config.activation = ActorCriticConfig::Activation::kRelu;
    cases.push_back(c);
  }
  {
    Case c{"nature_cnn_hwc", {}, Env()};
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
    Case c{"impala_cnn_chw", {}, Env(-1, 1)};
    c.config.encoder = ActorCriticConfig::Encoder::kImpalaCnn;
    c.config.image_chw = {3, 9, 7};
    c.config.observation_size = 3 * 9 * 7;
    c.config.byte_observations = true;
    c.config.hidden_sizes = {16};
    c.config.action_size = 2;
    cases.push_back(c);
  }
  {
    Case c{"lstm_masked", {}, Env()};
    c.config.observation_size = 4;
    c.config.num_actions = 3;
    c.config.action_masks = true;
    c.config.hidden_sizes = {8};
    c.config.core = ActorCriticConfig::Core::kLstm;
    c.config.core_size = 6;
    cases.push_back(c);
  }
  {
    Case c{"gru_continuous", {}, Env(-1, 1)};
    c.config.observation_size = 3;
    c.config.action_size = 2;
    c.config.normalize_observations = true;
    c.config.core = ActorCriticConfig::Core::kGru;
    c.config.core_size = 5;
    cases.push_back(c);
  }
  return cases;
}

// 1,000 observations (and masks) of `c`'s kinds.
std::vector<torch::Tensor> Inputs(const ActorCriticConfig& c) {
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
    masks.select(1, 0).fill_(1);
    if (!c.action_nvec.empty()) masks.select(1, c.action_nvec[0]).fill_(1);
    inputs.push_back(masks);
  }
  return inputs;
}

// Every kind of policy, exported and loaded back with torch::jit::load,
// gives the learner's policy's actions and values on 1,000 observations.
TEST(PolicyExportTest, TheLoadedModuleActsAsThePolicy) {
  const std::string dir = MakeTestDir("export");
  for (const Case& c : Cases()) {
    torch::manual_seed(1);
    ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
    const std::vector<torch::Tensor> inputs = Inputs(c.config);
    if (c.config.normalize_observations) {
      ASSERT_OK(policy->UpdateObservationStatistics(inputs[0] + 1));
    }
    const std::string path = dir + "/" + c.name + ".pt";
    ASSERT_OK(ExportTorchScript(policy, c.env, {}, path)) << c.name;

    ASSERT_OK_AND_ASSIGN(auto loaded, ExportedPolicy::Load(path));
    ASSERT_EQ(loaded->state_size(), policy->state_size()) << c.name;
    // A recurrent policy: both from the same nonzero state.
    torch::Tensor state, want_state;
    if (policy->recurrent()) {
      state = torch::randn({1000, policy->state_size()});
      want_state = state.clone();
    }
    ASSERT_OK_AND_ASSIGN(
        const auto out,
        loaded->Act(inputs[0], inputs.size() > 1 ? inputs[1] : torch::Tensor(),
                    &state));
    const auto& [actions, values] = out;
    torch::NoGradGuard no_grad;
    const PolicyStep want =
        policy->Act(inputs[0], c10::nullopt, true,
                    inputs.size() > 1 ? inputs[1] : torch::Tensor(),
                    policy->recurrent() ? &want_state : nullptr);
    EXPECT_LE((values - want.values).abs().max().item<double>(), 1e-5)
        << c.name;
    if (policy->recurrent()) {
      EXPECT_LE((state - want_state).abs().max().item<double>(), 1e-5)
          << c.name;
      const std::string sidecar = ReadTestFile(path + ".json");
      EXPECT_THAT(sidecar, HasSubstr("\"name\": \"next_state\""));
      EXPECT_THAT(
          loaded
              ->Act(inputs[0], inputs.size() > 1 ? inputs[1] : torch::Tensor())
              .status(),
          StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("recurrent")));
    }
    if (c.config.action_size > 0) {
      const torch::Tensor clipped =
          want.actions.clamp(c.env.action_low(), c.env.action_high());
      EXPECT_LE((actions - clipped).abs().max().item<double>(), 1e-5) << c.name;
      EXPECT_LE(actions.max().item<float>(), c.env.action_high()) << c.name;
    } else {
      EXPECT_EQ(actions.scalar_type(), torch::kInt64) << c.name;
      EXPECT_TRUE(torch::equal(actions, want.actions)) << c.name;
    }
    const std::string sidecar = ReadTestFile(path + ".json");
    EXPECT_THAT(sidecar,
                HasSubstr("\"name\": \"obs\", \"dtype\": \"" +
                          std::string(c.config.byte_observations ? "uint8"
                                                                 : "float32")))
        << c.name;
    EXPECT_THAT(sidecar, HasSubstr("\"name\": \"values\"")) << c.name;
    EXPECT_EQ(c.config.action_masks,
              sidecar.find("\"name\": \"mask\"") != std::string::npos)
        << c.name;
  }
}

// Sampled actions follow the policy's probabilities and never take a
// masked action.
TEST(PolicyExportTest, SampledActionsFollowTheProbabilities) {
  Case c = Cases()[0];
  c.config.normalize_observations = false;
  torch::manual_seed(2);
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
  const std::string path = MakeTestDir("sampled") + "/policy.pt";
  PolicyExportOptions options;
  options.sampled = true;
  ASSERT_OK(ExportTorchScript(policy, c.env, options, path));
  torch::jit::Module module = torch::jit::load(path);
  const int64_t n = 20000;
  const torch::Tensor obs = (torch::randn({1, 5}) * 4).expand({n, 5});
  const torch::Tensor mask =
      torch::tensor({1, 1, 0, 1}, torch::kUInt8).expand({n, 4});
  const torch::Tensor actions =
      module.forward({obs, mask}).toTuple()->elements()[0].toTensor();
  torch::NoGradGuard no_grad;
  for (int64_t a = 0; a < 4; ++a) {
    const double p = policy
                         ->Evaluate(obs.slice(0, 0, 1), torch::tensor({a}),
                                    mask.slice(0, 0, 1))
                         .log_probs.exp()
                         .item<double>();
    const double seen = (actions == a).sum().item<double>() / n;
    EXPECT_NEAR(seen, p, 0.015) << "action " << a;
  }
  EXPECT_EQ((actions == 2).sum().item<int64_t>(), 0);  // masked
}

TEST(PolicyExportTest, LoadingNamesWhatIsWrong) {
  const std::string dir = MakeTestDir("load");
  EXPECT_THAT(ExportedPolicy::Load(dir + "/none.pt").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("none.pt: not a TorchScript module")));
  Case c = Cases()[0];
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
  ASSERT_OK(ExportTorchScript(policy, c.env, {}, dir + "/p.pt"));
  ASSERT_OK_AND_ASSIGN(auto loaded, ExportedPolicy::Load(dir + "/p.pt"));
  EXPECT_THAT(loaded->Act(torch::zeros({2, 5}), torch::Tensor()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("refused its inputs")));  // no mask
}

TEST(PolicyExportTest, TheSourceIsReadable) {
  Case c = Cases()[0];
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
  ASSERT_OK_AND_ASSIGN(const std::string source,
                       PolicySource(policy, c.env, {}));
  EXPECT_THAT(source,
              HasSubstr("def forward(self, obs: Tensor, mask: Tensor)"));
  EXPECT_THAT(source, HasSubstr("torch.rsqrt(self.obs_var + 1e-08)"));
  EXPECT_THAT(source, HasSubstr("action = torch.argmax(out, -1)"));
}

}  // namespace
}  // namespace rl
