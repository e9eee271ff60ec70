#include "policy/actor_critic.h"

#include <cmath>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

ActorCriticConfig Discrete() {
  ActorCriticConfig c;
  c.observation_size = 4;
  c.num_actions = 3;
  return c;
}

ActorCriticConfig Continuous() {
  ActorCriticConfig c;
  c.observation_size = 3;
  c.action_size = 2;
  c.initial_log_std = -0.5f;
  return c;
}

TEST(ActorCriticTest, CategoricalLogProbsAndEntropyAreConsistent) {
  torch::manual_seed(0);
  ActorCritic policy(Discrete());
  const torch::Tensor obs = torch::randn({5, 4});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const PolicyStep step = policy->Act(obs, gen);
  EXPECT_EQ(step.actions.scalar_type(), torch::kInt64);
  EXPECT_EQ(step.actions.sizes(), (std::vector<int64_t>{5}));
  EXPECT_TRUE((step.actions >= 0).all().item<bool>());
  EXPECT_TRUE((step.actions < 3).all().item<bool>());
  const PolicyEvaluation eval = policy->Evaluate(obs, step.actions);
  EXPECT_TRUE(torch::allclose(eval.log_probs, step.log_probs));
  EXPECT_TRUE(torch::allclose(eval.values, step.values));
  // Near-uniform initial policy: entropy close to log(3).
  EXPECT_NEAR(eval.entropy.mean().item<double>(), std::log(3.0), 1e-2);
}

// A masked action is never sampled (nor chosen greedily), and has
// probability 0 in the log-probabilities and entropy of the loss, whose
// gradients stay finite.
TEST(ActorCriticTest, MaskedActionsAreNeverTakenAndWeighNothing) {
  torch::manual_seed(0);
  ActorCriticConfig config = Discrete();
  config.action_masks = true;
  ActorCritic policy(config);
  const int64_t B = 4000;
  const torch::Tensor obs = torch::randn({B, 4});
  // Row i allows every action but (i % 3); rows 1 mod 7 allow only 2.
  torch::Tensor masks = torch::ones({B, 3}, torch::kUInt8);
  for (int64_t i = 0; i < B; ++i) {
    masks[i][i % 3] = 0;
    if (i % 7 == 1) masks[i] = torch::tensor({0, 0, 1}, torch::kUInt8);
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  for (const bool greedy : {false, true}) {
    const PolicyStep step = policy->Act(obs, gen, greedy, masks);
    const torch::Tensor taken =
        masks.gather(1, step.actions.unsqueeze(1)).squeeze(1);
    EXPECT_TRUE((taken == 1).all().item<bool>()) << greedy;
    EXPECT_TRUE(torch::isfinite(step.log_probs).all().item<bool>());
  }
  const PolicyStep step = policy->Act(obs, gen, false, masks);
  // Both allowed actions of a two-action row are taken (about half each).
  const torch::Tensor rows0 = torch::arange(0, B, 3 * 7);  // i % 3 == 0
  EXPECT_GT((step.actions.index_select(0, rows0) == 1).sum().item<int64_t>(),
            30);
  const PolicyEvaluation eval = policy->Evaluate(obs, step.actions, masks);
  EXPECT_TRUE(torch::allclose(eval.log_probs, step.log_probs, 1e-5, 1e-5));
  // One allowed action: probability 1, entropy 0.
  const torch::Tensor single = torch::arange(1, B, 7);
  EXPECT_TRUE(torch::allclose(eval.log_probs.index_select(0, single),
                              torch::zeros({single.size(0)}), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(eval.entropy.index_select(0, single),
                              torch::zeros({single.size(0)}), 1e-5, 1e-5));
  // At most log 2 with two allowed actions (log 3 without masks).
  EXPECT_LE(eval.entropy.max().item<float>(), std::log(2.0f) + 1e-5);
  (eval.log_probs.mean() - eval.entropy.mean()).backward();
  for (const auto& p : policy->parameters()) {
    if (p.grad().defined()) {
      EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
    }
  }
  // Masks that do not fit are a Status.
  EXPECT_FALSE(
      policy->CheckActionMasks(torch::ones({B, 2}, torch::kUInt8), "masks", B)
          .ok());
  EXPECT_FALSE(policy->CheckActionMasks(torch::Tensor(), "masks", B).ok());
  ActorCritic unmasked(Discrete());
  EXPECT_THAT(
      std::string(unmasked->CheckActionMasks(masks, "masks", B).message()),
      HasSubstr("takes no action masks"));
}

// MultiDiscrete: one categorical per part; the log-probability of an action
// is the sum of its parts', the entropy the sum of theirs; masks hold each
// part's choices in turn.
TEST(ActorCriticTest, MultiDiscreteActionsArePartsOfCategoricals) {
  torch::manual_seed(0);
  ActorCriticConfig config;
  config.observation_size = 4;
  config.action_nvec = {3, 2};
  config.action_masks = true;
  ASSERT_TRUE(CreateActorCritic(config).ok());
  ActorCritic policy(config);
  const int64_t B = 2000;
  const torch::Tensor obs = torch::randn({B, 4});
  torch::Tensor masks = torch::ones({B, 5}, torch::kUInt8);
  masks.index_put_({torch::indexing::Slice(), 0}, 0);  // part 0: never 0
  masks.index_put_({torch::indexing::Slice(), 4}, 0);  // part 1: always 0
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
  const PolicyStep step = policy->Act(obs, gen, false, masks);
  ASSERT_EQ(step.actions.sizes(), (std::vector<int64_t>{B, 2}));
  EXPECT_EQ(step.actions.scalar_type(), torch::kInt64);
  EXPECT_OK(policy->CheckActions(step.actions, "actions", B));
  const torch::Tensor part0 = step.actions.select(1, 0);
  EXPECT_TRUE(((part0 == 1) | (part0 == 2)).all().item<bool>());
  EXPECT_GT((part0 == 1).sum().item<int64_t>(), 500);
  EXPECT_GT((part0 == 2).sum().item<int64_t>(), 500);
  EXPECT_TRUE((step.actions.select(1, 1) == 0).all().item<bool>());
  const PolicyEvaluation eval = policy->Evaluate(obs, step.actions, masks);
  EXPECT_TRUE(torch::allclose(eval.log_probs, step.log_probs, 1e-5, 1e-5));
  // Two allowed choices in part 0, one in part 1: at most log 2.
  EXPECT_LE(eval.entropy.max().item<float>(), std::log(2.0f) + 1e-5);
  EXPECT_GT(eval.entropy.min().item<float>(), 0.5f);
  EXPECT_FALSE(
      policy->CheckActions(torch::zeros({B}, torch::kInt64), "a", B).ok());
  ActorCriticConfig both = config;
  both.num_actions = 3;
  EXPECT_THAT(std::string(CreateActorCritic(both).status().message()),
              HasSubstr("exactly one of"));
}

// MultiBinary through a Bernoulli head: one logit per bit, each bit 1 with
// probability sigmoid(logit) (sampled frequencies and the log-probabilities
// and entropy in closed form); masks force a bit where they allow one value.
TEST(ActorCriticTest, MultiBinaryActionsAreBernoulliBits) {
  torch::manual_seed(0);
  ActorCriticConfig config;
  config.observation_size = 4;
  config.action_nvec = {2, 2, 2};
  config.bernoulli = true;
  config.action_masks = true;
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(config));
  EXPECT_EQ(policy->named_parameters()["policy_head.weight"].size(0), 3);
  {
    torch::NoGradGuard no_grad;
    policy->named_parameters()["policy_head.bias"].copy_(
        torch::tensor({1.5f, -0.5f, 0.0f}));
  }
  const int64_t B = 20000;
  const torch::Tensor obs = torch::zeros({B, 4});
  torch::Tensor masks = torch::ones({B, 6}, torch::kUInt8);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
  const PolicyStep step = policy->Act(obs, gen, false, masks);
  ASSERT_EQ(step.actions.sizes(), (std::vector<int64_t>{B, 3}));
  EXPECT_OK(policy->CheckActions(step.actions, "actions", B));
  const torch::Tensor ones = step.actions.to(torch::kFloat32).mean(0);
  const torch::Tensor p = torch::sigmoid(torch::tensor({1.5f, -0.5f, 0.0f}));
  EXPECT_TRUE(torch::allclose(ones, p, 0, 0.015)) << ones << p;
  // log p(a) = sum of each bit's log p.
  const torch::Tensor a = step.actions.to(torch::kFloat32);
  const torch::Tensor want =
      (a * torch::log(p) + (1 - a) * torch::log(1 - p)).sum(-1);
  EXPECT_TRUE(torch::allclose(step.log_probs, want, 1e-5, 1e-5));
  const PolicyEvaluation eval = policy->Evaluate(obs, step.actions, masks);
  EXPECT_TRUE(torch::allclose(eval.log_probs, step.log_probs, 1e-5, 1e-5));
  const float entropy =
      -(p * torch::log(p) + (1 - p) * torch::log(1 - p)).sum().item<float>();
  EXPECT_NEAR(eval.entropy[0].item<float>(), entropy, 1e-5);
  // Bit 0 may only be 0, bit 1 only 1: forced, with probability 1.
  masks.select(1, 1).fill_(0);
  masks.select(1, 2).fill_(0);
  const PolicyStep forced = policy->Act(obs, gen, false, masks);
  EXPECT_TRUE((forced.actions.select(1, 0) == 0).all().item<bool>());
  EXPECT_TRUE((forced.actions.select(1, 1) == 1).all().item<bool>());
  const PolicyEvaluation f = policy->Evaluate(obs, forced.actions, masks);
  EXPECT_NEAR(f.entropy[0].item<float>(),
              -(p[2] * torch::log(p[2]) + (1 - p[2]) * torch::log(1 - p[2]))
                   .item<float>(),
              1e-5);
  EXPECT_TRUE(torch::isfinite(f.log_probs).all().item<bool>());
  // Deterministic: the likelier value of each free bit.
  const PolicyStep best = policy->Act(obs, gen, true, masks);
  EXPECT_EQ(best.actions[0][2].item<int64_t>(), 0);  // logit 0: not > 0
  ActorCriticConfig not_bits = config;
  not_bits.action_nvec = {2, 3};
  EXPECT_THAT(CreateActorCritic(not_bits).status().message(),
              HasSubstr("action_nvec[1] must be 2"));
}

TEST(ActorCriticTest, SamplingFrequenciesFollowTheProbabilities) {
  torch::manual_seed(0);
  ActorCritic policy(Discrete());
  const torch::Tensor obs = torch::randn({1, 4}).expand({20000, 4});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const PolicyStep step = policy->Act(obs, gen);
  const torch::Tensor freq =
      torch::bincount(step.actions, {}, 3).to(torch::kFloat32) / 20000;
  const torch::Tensor probs = step.log_probs.exp();  // p(chosen action)
  // Each chosen action's probability equals its empirical frequency.
  for (int a = 0; a < 3; ++a) {
    const torch::Tensor mask = step.actions == a;
    const double p = probs.index({mask})[0].item<double>();
    EXPECT_NEAR(freq[a].item<double>(), p, 0.015);
  }
}

TEST(ActorCriticTest, GaussianLogProbMatchesClosedForm) {
  torch::manual_seed(0);
  ActorCritic policy(Continuous());
  const torch::Tensor obs = torch::randn({4, 3});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const PolicyStep step = policy->Act(obs, gen);
  const PolicyStep mean_step = policy->Act(obs, c10::nullopt, true);
  const torch::Tensor std = torch::full({2}, std::exp(-0.5));
  const torch::Tensor z = (step.actions - mean_step.actions) / std;
  const torch::Tensor expected =
      (-0.5 * z * z - std.log() - 0.5 * std::log(2 * M_PI)).sum(-1);
  EXPECT_TRUE(torch::allclose(step.log_probs, expected, 1e-5, 1e-5));
  const PolicyEvaluation eval = policy->Evaluate(obs, step.actions);
  EXPECT_TRUE(torch::allclose(eval.log_probs, step.log_probs, 1e-5, 1e-5));
  // Entropy of a diagonal Gaussian: sum(log std + 0.5 log(2 pi e)).
  EXPECT_NEAR(eval.entropy[0].item<double>(),
              2 * (-0.5 + 0.5 * std::log(2 * M_PI * M_E)), 1e-5);
}

TEST(ActorCriticTest, ObservationStatisticsTrackMeanAndVariance) {
  ActorCriticConfig c = Discrete();
  c.normalize_observations = true;
  ActorCritic policy(c);
  torch::manual_seed(2);
  const torch::Tensor a = torch::randn({1000, 4}) * 3 + 5;
  const torch::Tensor b = torch::randn({500, 4}) * 3 + 5;
  ASSERT_TRUE(policy->UpdateObservationStatistics(a).ok());
  ASSERT_TRUE(policy->UpdateObservationStatistics(b).ok());
  const torch::Tensor all = torch::cat({a, b});
  const torch::Tensor normalized = policy->NormalizeObservations(all);
  EXPECT_NEAR(normalized.mean().item<double>(), 0.0, 1e-3);
  EXPECT_NEAR(normalized.std().item<double>(), 1.0, 1e-2);
  // Statistics are buffers: they travel with the weights.
  int buffers = 0;
  for (const auto& item : policy->named_buffers()) {
    buffers += item.key().rfind("obs_", 0) == 0;
  }
  EXPECT_EQ(buffers, 3);
}

// uint8 observations are the float ones / 255 to the network: the same
// actions, values and statistics; float32 ones are refused by name.
TEST(ActorCriticTest, ByteObservationsAreScaledInsideTheNetwork) {
  ActorCriticConfig c = Discrete();
  c.normalize_observations = true;
  c.byte_observations = true;
  ActorCritic policy(c);
  torch::manual_seed(4);
  const torch::Tensor bytes = torch::randint(0, 256, {64, 4}, torch::kUInt8);
  const torch::Tensor scaled = bytes.to(torch::kFloat32) / 255.0f;
  ASSERT_OK(policy->UpdateObservationStatistics(bytes));
  // The statistics are of the scaled values: they normalise them.
  const torch::Tensor normalized = policy->NormalizeObservations(bytes);
  EXPECT_NEAR(normalized.mean().item<double>(), 0.0, 1e-3);
  EXPECT_TRUE(
      torch::allclose(normalized, policy->NormalizeObservations(scaled)));
  EXPECT_TRUE(
      torch::allclose(policy->Value(bytes), policy->Value(scaled), 1e-5, 1e-6));
  auto step = ActChecked(policy, bytes, c10::nullopt, true);
  ASSERT_OK(step.status());
  const PolicyEvaluation eval = policy->Evaluate(scaled, step->actions);
  EXPECT_TRUE(torch::allclose(eval.log_probs, step->log_probs, 1e-5, 1e-5));
  EXPECT_THAT(
      ActChecked(policy, scaled, c10::nullopt, true).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("observations")));
}

// An image policy: `encoder` over [C, H, W] images laid out HWC.
ActorCriticConfig Cnn(ActorCriticConfig::Encoder encoder, int64_t c, int64_t h,
                      int64_t w) {
  ActorCriticConfig config;
  config.encoder = encoder;
  config.image_chw = {c, h, w};
  config.channels_last = true;
  config.observation_size = static_cast<int>(c * h * w);
  config.num_actions = 3;
  config.hidden_sizes = {};
  return config;
}

// sum(log pi(a|s)) + sum(V(s)) of fixed actions over 2 steps of 2 envs
// (with a core: from a random state, env 0's episode ending after step 0):
// every parameter's gradient is checked against central finite
// differences, in float64, at a few entries of each parameter tensor.
void ExpectGradientsMatchFiniteDifferences(const ActorCriticConfig& config) {
  torch::manual_seed(3);
  auto created = CreateActorCritic(config);
  ASSERT_OK(created.status());
  ActorCritic policy = *created;
  policy->to(torch::kFloat64);
  const torch::Tensor obs =
      torch::rand({2, 2, config.observation_size}, torch::kFloat64);
  // Byte parts hold bytes (scaled by 1 / 255 inside): [0, 255).
  for (const auto& part : config.observation_parts) {
    if (part.bytes) obs.narrow(2, part.offset, part.size).mul_(255);
  }
  const torch::Tensor actions =
      config.action_nvec.empty()
          ? torch::tensor({0, 1, 2, 1}, torch::kInt64).view({2, 2})
          : torch::tensor({0, 1, 1, 1, 0, 0, 1, 0}, torch::kInt64)
                .view({2, 2, 2});
  const torch::Tensor state =
      policy->recurrent()
          ? torch::rand({2, policy->state_size()}, torch::kFloat64) - 0.5
          : torch::Tensor();
  const torch::Tensor ends =
      torch::tensor({1, 0, 0, 0}, torch::kUInt8).view({2, 2});
  auto loss = [&] {
    const PolicyEvaluation e =
        policy->EvaluateSequence(obs, actions, torch::Tensor(), state, ends);
    return e.log_probs.sum() + e.values.sum();
  };
  policy->zero_grad();
  loss().backward();
  int checked = 0;
  for (const auto& item : policy->named_parameters()) {
    torch::Tensor p = item.value();
    const torch::Tensor grad = p.grad().clone();
    ASSERT_TRUE(grad.defined()) << item.key();
    double* data = p.data_ptr<double>();
    const double* g = grad.data_ptr<double>();
    for (int64_t k : {int64_t{0}, p.numel() / 2, p.numel() - 1}) {
      torch::NoGradGuard no_grad;
      const double saved = data[k];
      constexpr double kEps = 1e-6;
      data[k] = saved + kEps;
      const double up = loss().item<double>();
      data[k] = saved - kEps;
      const double down = loss().item<double>();
      data[k] = saved;
      const double numeric = (up - down) / (2 * kEps);
      EXPECT_NEAR(g[k], numeric, 1e-5 * std::max(1.0, std::fabs(numeric)))
          << item.key() << "[" << k << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 12);
}

TEST(ActorCriticTest, ImpalaCnnGradientsMatchFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(
      Cnn(ActorCriticConfig::Encoder::kImpalaCnn, 2, 8, 8));
}

// A Dict observation: a 2-float one-hot, an HWC image of bytes (as
// floats), 3 floats; read per key by `encoder`.
ActorCriticConfig Dict(ActorCriticConfig::Encoder encoder) {
  ActorCriticConfig config;
  config.encoder = encoder;
  config.channels_last = true;
  config.observation_parts = {{"flip", 0, 2, {2}, false},
                              {"image", 2, 8 * 8 * 2, {8, 8, 2}, true},
                              {"speed", 130, 3, {3}, false}};
  config.observation_size = 133;
  config.num_actions = 3;
  config.hidden_sizes = {5};
  return config;
}

TEST(ActorCriticTest, BernoulliGradientsMatchFiniteDifferences) {
  ActorCriticConfig config;
  config.observation_size = 3;
  config.action_nvec = {2, 2};
  config.bernoulli = true;
  config.hidden_sizes = {5};
  ExpectGradientsMatchFiniteDifferences(config);
}

TEST(ActorCriticTest, PerKeyEncoderGradientsMatchFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(
      Dict(ActorCriticConfig::Encoder::kImpalaCnn));
}

// The per-key encoder: a CNN for the image part alone (its bytes scaled
// to [0, 1]), the other parts as they are.
TEST(ActorCriticTest, ADictIsReadPartByPart) {
  torch::manual_seed(1);
  ASSERT_OK_AND_ASSIGN(
      ActorCritic policy,
      CreateActorCritic(Dict(ActorCriticConfig::Encoder::kImpalaCnn)));
  EXPECT_TRUE(policy->per_key());
  std::set<std::string> encoders;
  for (const auto& item : policy->named_parameters()) {
    if (item.key().rfind("encoder", 0) == 0) {
      encoders.insert(item.key().substr(0, item.key().find('.')));
    }
  }
  EXPECT_EQ(encoders, (std::set<std::string>{"encoder_1"}));
  // The trunk reads 256 CNN features, the flip's 2 and the speed's 3.
  EXPECT_EQ(policy->named_parameters()["policy_trunk.0.weight"].size(1),
            256 + 2 + 3);
  torch::Tensor obs = torch::zeros({1, 133});
  obs.narrow(1, 2, 128).fill_(255);
  obs[0][0] = 1;
  obs[0][131] = 7;
  const torch::Tensor scaled = policy->FloatObservations(obs);
  EXPECT_EQ(scaled[0][0].item<float>(), 1);
  EXPECT_FLOAT_EQ(scaled[0][2].item<float>(), 1);  // 255 / 255
  EXPECT_EQ(scaled[0][131].item<float>(), 7);
  // Each part moves the output.
  const torch::Tensor value = policy->Value(obs);
  for (int64_t at : {0, 50, 132}) {
    torch::Tensor other = obs.clone();
    other[0][at] += 3;
    EXPECT_NE(policy->Value(other).item<float>(), value.item<float>())
        << "element " << at;
  }
  // A CNN needs an image part; the Nature CNN one of 36x36.
  ActorCriticConfig no_image = Dict(ActorCriticConfig::Encoder::kImpalaCnn);
  no_image.observation_parts[1].bytes = false;
  EXPECT_THAT(CreateActorCritic(no_image).status().message(),
              HasSubstr("no observation part is a uint8 image"));
  EXPECT_THAT(CreateActorCritic(Dict(ActorCriticConfig::Encoder::kNatureCnn))
                  .status()
                  .message(),
              HasSubstr("at least 36x36 (observation part image is 8x8)"));
  ActorCriticConfig gap = Dict(ActorCriticConfig::Encoder::kMlp);
  gap.observation_parts[2].offset = 131;
  EXPECT_THAT(CreateActorCritic(gap).status().message(),
              HasSubstr("observation part speed"));
  // The MLP reads the Dict whole, the image's bytes scaled all the same.
  ASSERT_OK_AND_ASSIGN(
      ActorCritic mlp,
      CreateActorCritic(Dict(ActorCriticConfig::Encoder::kMlp)));
  EXPECT_FALSE(mlp->per_key());
  EXPECT_FLOAT_EQ(mlp->FloatObservations(obs)[0][2].item<float>(), 1);
}

ActorCriticConfig Recurrent(ActorCriticConfig::Core core) {
  ActorCriticConfig config;
  config.observation_size = 3;
  config.num_actions = 3;
  config.hidden_sizes = {5};
  config.core = core;
  config.core_size = 4;
  return config;
}

// Truncated BPTT through the LSTM and GRU cores, and the trunk before them.
TEST(ActorCriticTest, RecurrentGradientsMatchFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(
      Recurrent(ActorCriticConfig::Core::kLstm));
  ExpectGradientsMatchFiniteDifferences(
      Recurrent(ActorCriticConfig::Core::kGru));
  // The observations straight into a core (no hidden layers).
  ActorCriticConfig direct = Recurrent(ActorCriticConfig::Core::kGru);
  direct.hidden_sizes = {};
  ExpectGradientsMatchFiniteDifferences(direct);
}

// What the actor computes step by step (Act from a carried state, zeroed
// where an episode ends) is what the learner recomputes over the whole
// sequence: the same log-probabilities and values.
TEST(ActorCriticTest, SequenceEvaluationRetracesTheSteps) {
  for (const auto core :
       {ActorCriticConfig::Core::kLstm, ActorCriticConfig::Core::kGru}) {
    torch::manual_seed(5);
    ActorCriticConfig config = Recurrent(core);
    config.action_masks = true;
    ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(config));
    EXPECT_EQ(policy->state_size(),
              core == ActorCriticConfig::Core::kLstm ? 8 : 4);
    constexpr int64_t T = 6, B = 3;
    const torch::Tensor obs = torch::randn({T, B, 3});
    torch::Tensor masks = torch::ones({T, B, 3}, torch::kUInt8);
    masks.index_put_({torch::indexing::Slice(), 1, 0}, 0);  // env 1: no 0
    torch::Tensor ends = torch::zeros({T, B}, torch::kUInt8);
    ends[1][0] = 1;
    ends[3][2] = 1;
    ends[4][0] = 1;
    const torch::Tensor initial = torch::randn({B, policy->state_size()});
    torch::Tensor state = initial.clone();
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(9);
    std::vector<torch::Tensor> actions, log_probs, values;
    {
      torch::NoGradGuard no_grad;
      for (int64_t t = 0; t < T; ++t) {
        const PolicyStep step =
            policy->Act(obs[t], gen, false, masks[t], &state);
        EXPECT_EQ(state.sizes(), initial.sizes());
        actions.push_back(step.actions);
        log_probs.push_back(step.log_probs);
        values.push_back(step.values);
        state = state * (1 - ends[t].to(torch::kFloat32)).unsqueeze(1);
      }
    }
    const torch::Tensor taken = torch::stack(actions);
    EXPECT_FALSE(taken.select(1, 1).eq(0).any().item<bool>());
    const PolicyEvaluation eval =
        policy->EvaluateSequence(obs, taken, masks, initial, ends);
    EXPECT_TRUE(torch::allclose(
        eval.log_probs, torch::stack(log_probs).reshape({T * B}), 1e-5, 1e-6));
    EXPECT_TRUE(torch::allclose(
        eval.values, torch::stack(values).reshape({T * B}), 1e-5, 1e-6));
    // The carried state matters: from zeros the same steps read otherwise.
    const PolicyEvaluation from_zero = policy->EvaluateSequence(
        obs, taken, masks, policy->InitialState(B), ends);
    EXPECT_FALSE(torch::allclose(from_zero.values, eval.values, 1e-5, 1e-6));
    // Acting without a state is an error, not a silent reset.
    EXPECT_THAT(ActChecked(policy, obs[0], gen, false, masks[0]).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("acts from a state")));
    torch::Tensor wrong = torch::zeros({B, 2});
    EXPECT_THAT(
        ActChecked(policy, obs[0], gen, false, masks[0], &wrong).status(),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("state")));
  }
}

TEST(ActorCriticTest, NatureCnnGradientsMatchFiniteDifferences) {
  ActorCriticConfig c = Cnn(ActorCriticConfig::Encoder::kNatureCnn, 1, 36, 36);
  c.hidden_sizes = {8};  // layers after the CNN's features
  ExpectGradientsMatchFiniteDifferences(c);
}

// The same weights read HWC observations and their CHW transposes alike;
// images too small for the Nature CNN, or that do not multiply to the
// observation size, make no network.
TEST(ActorCriticTest, CnnLayoutsAgreeAndBadImagesAreRefused) {
  ActorCriticConfig hwc = Cnn(ActorCriticConfig::Encoder::kImpalaCnn, 3, 6, 5);
  ActorCriticConfig chw = hwc;
  chw.channels_last = false;
  torch::manual_seed(1);
  auto a = CreateActorCritic(hwc);
  auto b = CreateActorCritic(chw);
  ASSERT_OK(a.status());
  ASSERT_OK(b.status());
  {
    torch::NoGradGuard no_grad;
    auto from = (*a)->named_parameters();
    for (auto& item : (*b)->named_parameters()) {
      item.value().copy_(from[item.key()]);
    }
  }
  const torch::Tensor images =
      torch::randint(0, 256, {4, 6, 5, 3}, torch::kUInt8);
  const torch::Tensor hwc_obs = images.reshape({4, -1});
  const torch::Tensor chw_obs = images.permute({0, 3, 1, 2}).reshape({4, -1});
  EXPECT_TRUE(
      torch::allclose((*a)->Value(hwc_obs), (*b)->Value(chw_obs), 1e-5, 1e-6));
  EXPECT_EQ((*a)->Value(hwc_obs).sizes(), (std::vector<int64_t>{4}));
  ActorCriticConfig small =
      Cnn(ActorCriticConfig::Encoder::kNatureCnn, 1, 35, 40);
  EXPECT_THAT(CreateActorCritic(small).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("at least 36x36 (got 35x40)")));
  ActorCriticConfig wrong = hwc;
  wrong.observation_size = 91;
  EXPECT_THAT(CreateActorCritic(wrong).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("observation_size 91 (got [3, 6, 5])")));
}

TEST(ActorCriticTest, SharedTrunkHasFewerParameters) {
  ActorCriticConfig separate = Discrete();
  ActorCriticConfig shared = Discrete();
  shared.shared_trunk = true;
  auto count = [](ActorCritic p) {
    int64_t n = 0;
    for (const auto& t : p->parameters()) n += t.numel();
    return n;
  };
  EXPECT_LT(count(ActorCritic(shared)), count(ActorCritic(separate)));
}

TEST(ActorCriticTest, ConfigurationsThatMakeNoNetworkAreRejected) {
  ASSERT_TRUE(CreateActorCritic(Discrete()).ok());
  ActorCriticConfig c = Discrete();
  c.observation_size = 0;
  EXPECT_THAT(std::string(CreateActorCritic(c).status().message()),
              HasSubstr("observation_size must be >= 1"));
  c = Discrete();
  c.action_size = 2;  // and num_actions 3
  EXPECT_EQ(CreateActorCritic(c).status().code(),
            absl::StatusCode::kInvalidArgument);
  c = Discrete();
  c.hidden_sizes = {64, -1};
  EXPECT_THAT(std::string(CreateActorCritic(c).status().message()),
              HasSubstr("hidden_sizes[1] must be >= 1"));
}

// A batch that does not fit the network is a Status naming both shapes,
// where policy->Act would throw from inside a matrix product.
TEST(ActorCriticTest, ActingOnMisshapedObservationsIsAnErrorStatus) {
  torch::manual_seed(0);
  ActorCritic policy(Discrete());
  EXPECT_THROW(policy->Act(torch::zeros({5, 3}), c10::nullopt), c10::Error);
  for (const torch::Tensor& bad :
       {torch::zeros({5, 3}), torch::zeros({5, 4}, torch::kFloat64),
        torch::zeros({4}), torch::Tensor()}) {
    auto step = ActChecked(policy, bad, c10::nullopt);
    EXPECT_EQ(step.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(step.status().message()),
                HasSubstr("observations: expected Float[-1, 4], got "));
  }
  auto good = ActChecked(policy, torch::zeros({5, 4}), c10::nullopt, true);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->actions.size(0), 5);
  EXPECT_TRUE(policy->CheckActions(good->actions, "actions", 5).ok());
  EXPECT_THAT(
      std::string(
          policy->CheckActions(torch::zeros({5, 1}), "rollout.actions", 5)
              .message()),
      HasSubstr("rollout.actions: expected Long[5], got Float[5, 1]"));
}

TEST(ActorCriticTest, ObservationStatisticsRefuseBadBatches) {
  ActorCriticConfig c = Continuous();
  c.normalize_observations = true;
  ActorCritic policy(c);
  const torch::Tensor mean_before = policy->named_buffers()["obs_mean"].clone();
  const absl::Status shape =
      policy->UpdateObservationStatistics(torch::ones({10, 4}));
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shape.message()), HasSubstr("got Float[10, 4]"));
  torch::Tensor nan = torch::ones({10, 3});
  nan[4][1] = std::nan("");
  const absl::Status finite = policy->UpdateObservationStatistics(nan);
  EXPECT_EQ(finite.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(finite.message()),
              HasSubstr("values must be finite"));
  EXPECT_TRUE(torch::equal(policy->named_buffers()["obs_mean"], mean_before));
  EXPECT_TRUE(policy->UpdateObservationStatistics(torch::ones({10, 3})).ok());
  EXPECT_FALSE(torch::equal(policy->named_buffers()["obs_mean"], mean_before));
}

TEST(ActorCriticTest, TheActivationIsTheConfigured) {
  for (auto activation : {ActorCriticConfig::Activation::kTanh,
                          ActorCriticConfig::Activation::kRelu}) {
    ActorCriticConfig c;
    c.observation_size = 4;
    c.num_actions = 2;
    c.activation = activation;
    ActorCritic policy(c);
    int tanh = 0, relu = 0;
    for (const auto& module : policy->modules()) {
      // "torch::nn::TanhImpl", "torch::nn::ReLUImpl"
      tanh += module->name().find("Tanh") != std::string::npos;
      relu += module->name().find("ReLU") != std::string::npos;
    }
    const bool is_relu = activation == ActorCriticConfig::Activation::kRelu;
    EXPECT_EQ(relu, is_relu ? 4 : 0);  // 2 layers x 2 trunks
    EXPECT_EQ(tanh, is_relu ? 0 : 4);
  }
  // From a run's policy block.
  PolicyConfig block;
  block.set_activation("relu");
  EnvSpec cartpole;
  cartpole.set_observation_size(4);
  cartpole.set_num_discrete_actions(2);
  EXPECT_EQ(MakeActorCriticConfig(cartpole, block, PPOConfig()).activation,
            ActorCriticConfig::Activation::kRelu);
}

TEST(ActorCriticTest, FirstNonFiniteWeightNamesTheParameter) {
  ActorCritic policy(Discrete());
  auto finite = FirstNonFiniteWeight(policy);
  ASSERT_TRUE(finite.ok()) << finite.status();
  EXPECT_EQ(*finite, "");
  torch::NoGradGuard no_grad;
  auto params = policy->named_parameters();
  const std::string name = params.begin()->key();
  params.begin()->value().view(-1)[0] = std::nanf("");
  EXPECT_EQ(FirstNonFiniteWeight(policy).value_or("?"), name);

  ActorCritic stats(Discrete());
  for (auto& b : stats->buffers()) {
    if (b.is_floating_point() && b.numel() > 0) {
      b.view(-1)[0] = INFINITY;
      break;
    }
  }
  EXPECT_EQ(FirstNonFiniteWeight(stats).value_or("?"),
            "the observation statistics");
}

}  // namespace
}  // namespace rl
