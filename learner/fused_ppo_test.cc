// The fused CPU path against LibTorch autograd, its reference: the gradient
// of one minibatch, then whole updaters side by side over several updates,
// and checkpoints crossing from one path to the other.
#include "learner/fused_ppo.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/checkpoint.h"
#include "learner/ppo_updater.h"
#include "runspec/run_spec.h"

namespace rl {
namespace {

struct Case {
  const char* name;
  int observation_size;
  int num_actions;
  int action_size;
  std::vector<int> hidden;
  bool shared;
  bool normalize_observations;
  std::string ppo;  // YAML flow mapping of ppo settings
  int central = 0;  // policy.central_value's agents per copy (0: none)
};

std::vector<Case> Cases() {
  return {
      {"cartpole-like, defaults",
       4,
       2,
       0,
       {64, 64},
       false,
       false,
       "{num_minibatches: 4}"},
      {"discrete, shared trunk, entropy, no value clip",
       6,
       5,
       0,
       {16, 8},
       true,
       true,
       "{num_minibatches: 2, entropy_coef: 0.05, clip_value_loss: false}"},
      {"discrete, tight gradient clip, no advantage normalisation",
       3,
       3,
       0,
       {12},
       false,
       false,
       "{num_minibatches: 1, max_grad_norm: 0.05, normalize_advantages: "
       "false, learning_rate: 0.003}"},
      {"continuous 7-5-3",
       5,
       0,
       2,
       {7, 5, 3},
       false,
       true,
       "{num_minibatches: 4, entropy_coef: 0.01, clip_coef: 0.1}"},
      {"continuous shared, no gradient clip",
       3,
       0,
       1,
       {32},
       true,
       false,
       "{num_minibatches: 2, max_grad_norm: 0, value_coef: 1.0}"},
      // 15 envs of 5 copies: the 512-row chunks are rounded to copies.
      {"discrete central critic of 3",
       6,
       3,
       0,
       {16, 8},
       false,
       true,
       "{num_minibatches: 4, entropy_coef: 0.01}",
       3},
      // A value input of 4 x 3 = 12 floats: the narrow first-layer gradient.
      {"discrete central critic of 4, narrow input",
       3,
       2,
       0,
       {8},
       false,
       false,
       "{num_minibatches: 2}",
       4},
      {"continuous central critic of 2, no hidden layer",
       3,
       0,
       2,
       {},
       false,
       false,
       "{num_minibatches: 2}",
       2},
  };
}

PPOConfig Ppo(const std::string& yaml) {
  auto spec =
      LoadRunSpec("env: {id: CartPole-v1}\nppo: " + yaml, RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec->ppo();
}

// execution.cpu_kernels: fused or libtorch.
ExecutionConfig Kernels(const std::string& kernels) {
  ExecutionConfig execution;
  execution.set_cpu_kernels(kernels);
  return execution;
}

ActorCritic MakePolicy(const Case& c) {
  ActorCriticConfig config;
  config.observation_size = c.observation_size;
  config.num_actions = c.num_actions;
  config.action_size = c.action_size;
  config.hidden_sizes = c.hidden;
  config.shared_trunk = c.shared;
  config.normalize_observations = c.normalize_observations;
  config.initial_log_std = -0.2f;
  config.central_value_agents = c.central;
  torch::manual_seed(3);
  ActorCritic policy(config);
  if (c.normalize_observations) {
    EXPECT_TRUE(policy
                    ->UpdateObservationStatistics(
                        torch::randn({40, c.observation_size}) * 2 + 0.5)
                    .ok());
  }
  return policy;
}

// A rollout collected by `policy` with made-up rewards, ends and
// truncations (T steps of 16 envs, 15 for whole copies of 3 agents).
Rollout MakeRollout(const Case& c, ActorCritic& policy, uint64_t seed,
                    int64_t T = 8) {
  const int64_t E = c.central == 3 ? 15 : 16;  // whole copies
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Rollout r = Rollout::Allocate(T, E, c.observation_size, c.action_size);
  torch::NoGradGuard no_grad;
  r.observations.copy_(torch::randn({T, E, c.observation_size}, gen) * 1.5);
  const PolicyStep step =
      policy->Act(r.observations.reshape({T * E, c.observation_size}), gen);
  r.actions.copy_(step.actions.reshape(r.actions.sizes()));
  r.log_probs.copy_(step.log_probs.reshape({T, E}));
  r.values.copy_(step.values.reshape({T, E}));
  r.rewards.copy_(torch::randn({T, E}, gen));
  r.terminated.copy_((torch::rand({T, E}, gen) < 0.1).to(torch::kUInt8));
  r.truncated.copy_((torch::rand({T, E}, gen) < 0.05).to(torch::kUInt8) *
                    (1 - r.terminated));
  r.truncated_values.copy_(torch::randn({T, E}, gen) * r.truncated);
  r.next_values.copy_(torch::randn({E}, gen));
  return r;
}

double MaxRelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs() / torch::clamp_min(b.abs(), 1.0)).max().item<double>();
}

TEST(FusedPpoTest, MinibatchGradientEqualsAutograd) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    ActorCritic policy = MakePolicy(c);
    const PPOConfig ppo = Ppo(c.ppo);
    // 1280 rows: the fused loss works in chunks of 512 rows.
    Rollout r = MakeRollout(c, policy, 5, /*T=*/80);
    // Perturb the weights so that the ratios leave the clip range on some
    // rows and the value clip bites.
    {
      torch::NoGradGuard no_grad;
      for (auto& p : policy->parameters()) p.add_(torch::randn_like(p) * 0.1);
    }
    const int64_t B = r.num_steps() * r.num_envs();
    const torch::Tensor obs = r.observations.reshape({B, -1});
    const torch::Tensor actions =
        c.num_actions > 0 ? r.actions.reshape({B}) : r.actions.reshape({B, -1});
    const torch::Tensor old_log_probs = r.log_probs.reshape({B});
    const torch::Tensor old_values = r.values.reshape({B});
    const torch::Tensor advantages = torch::randn({B});
    const torch::Tensor returns = old_values + torch::randn({B}) * 0.5;

    // LibTorch, as PpoUpdater::RunEpochs computes it.
    const float clip = ppo.clip_coef();
    const PolicyEvaluation eval = policy->Evaluate(obs, actions);
    const torch::Tensor log_ratio = eval.log_probs - old_log_probs;
    const torch::Tensor ratio = log_ratio.exp();
    const torch::Tensor policy_loss =
        torch::max(-advantages * ratio,
                   -advantages * torch::clamp(ratio, 1 - clip, 1 + clip))
            .mean();
    torch::Tensor value_loss;
    if (ppo.clip_value_loss()) {
      const torch::Tensor clipped =
          old_values + torch::clamp(eval.values - old_values, -clip, clip);
      value_loss = 0.5 * torch::max((eval.values - returns).pow(2),
                                    (clipped - returns).pow(2))
                             .mean();
    } else {
      value_loss = 0.5 * (eval.values - returns).pow(2).mean();
    }
    const torch::Tensor entropy = eval.entropy.mean();
    const torch::Tensor loss = policy_loss - ppo.entropy_coef() * entropy +
                               ppo.value_coef() * value_loss;
    for (auto& p : policy->parameters()) p.mutable_grad() = torch::Tensor();
    loss.backward();
    const double clipped_rows =
        ((ratio - 1).abs() > clip).to(torch::kFloat32).mean().item<double>();
    EXPECT_GT(clipped_rows, 0.0) << "the clip should bite on some rows";

    FusedPolicy fused;
    ASSERT_TRUE(fused.Bind(policy).ok());
    FusedPpoLoss fused_loss;
    std::vector<float> grads(fused.num_parameters());
    PpoMinibatch mb;
    mb.size = B;
    mb.observations = obs.data_ptr<float>();
    mb.discrete_actions =
        c.num_actions > 0 ? actions.data_ptr<int64_t>() : nullptr;
    mb.continuous_actions =
        c.num_actions > 0 ? nullptr : actions.data_ptr<float>();
    mb.old_log_probs = old_log_probs.data_ptr<float>();
    mb.old_values = old_values.data_ptr<float>();
    mb.advantages = advantages.data_ptr<float>();
    mb.returns = returns.data_ptr<float>();
    const PpoLossValues terms =
        fused_loss.Compute(fused, ppo, mb, grads.data());
    EXPECT_TRUE(terms.finite);
    EXPECT_NEAR(terms.policy_loss, policy_loss.item<double>(), 1e-5);
    EXPECT_NEAR(terms.value_loss, value_loss.item<double>(), 1e-5);
    EXPECT_NEAR(terms.entropy, entropy.item<double>(), 1e-5);
    EXPECT_NEAR(terms.clip_fraction, clipped_rows, 1e-6);

    int64_t offset = 0;
    for (const auto& item : policy->named_parameters()) {
      const torch::Tensor p = item.value();
      const torch::Tensor fused_grad =
          torch::from_blob(grads.data() + offset, p.sizes(), torch::kFloat32);
      ASSERT_TRUE(p.grad().defined()) << item.key();
      EXPECT_LT(MaxRelativeDifference(fused_grad, p.grad()), 1e-5)
          << item.key() << "\nfused " << fused_grad << "\nautograd "
          << p.grad();
      offset += p.numel();
    }
  }
}

TEST(FusedPpoTest, UpdatesTakeTheSameStepsAsLibTorch) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    ActorCritic reference_policy = MakePolicy(c);
    ActorCritic fused_policy = MakePolicy(c);
    PpoUpdater reference(reference_policy, Ppo(c.ppo), 1 << 16, 9,
                         Kernels("libtorch"));
    PpoUpdater fused(fused_policy, Ppo(c.ppo), 1 << 16, 9, Kernels("fused"));
    for (int k = 0; k < 6; ++k) {
      SCOPED_TRACE("update " + std::to_string(k + 1));
      const Rollout r = MakeRollout(c, reference_policy, 100 + k);
      auto a = reference.Update(r, k * 128);
      auto b = fused.Update(r, k * 128);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_FALSE(reference.fused());
      EXPECT_TRUE(fused.fused());
      EXPECT_NEAR(a->policy_loss, b->policy_loss, 1e-5);
      EXPECT_NEAR(a->value_loss, b->value_loss, 1e-4 * (1 + a->value_loss));
      EXPECT_NEAR(a->entropy, b->entropy, 1e-5);
      EXPECT_NEAR(a->grad_norm, b->grad_norm, 1e-4 * (1 + a->grad_norm));
      EXPECT_NEAR(a->approx_kl, b->approx_kl, 1e-5);
      EXPECT_NEAR(a->clip_fraction, b->clip_fraction, 1e-6);
      EXPECT_NEAR(a->explained_variance, b->explained_variance, 1e-4);
      EXPECT_EQ(a->epochs, b->epochs);
      const auto ra = reference_policy->named_parameters();
      const auto fb = fused_policy->named_parameters();
      for (const auto& item : ra) {
        EXPECT_LT(MaxRelativeDifference(fb[item.key()], item.value()), 1e-5)
            << item.key();
      }
      const auto ba = reference_policy->named_buffers();
      const auto bb = fused_policy->named_buffers();
      for (const auto& item : ba) {
        EXPECT_TRUE(torch::allclose(bb[item.key()], item.value(), 1e-6))
            << item.key();
      }
    }
  }
}

TEST(FusedPpoTest, CheckpointsCrossBetweenThePaths) {
  const Case c = Cases()[0];
  const std::string root = ::testing::TempDir() + "/fused_ppo_checkpoints";
  std::filesystem::remove_all(root);
  for (const auto& [writer_kernels, reader_kernels] :
       {std::pair<std::string, std::string>{"fused", "libtorch"},
        {"libtorch", "fused"}}) {
    SCOPED_TRACE(writer_kernels + " -> " + reader_kernels);
    ActorCritic writer_policy = MakePolicy(c);
    PpoUpdater writer(writer_policy, Ppo(c.ppo), 1 << 16, 2,
                      Kernels(writer_kernels));
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(writer.Update(MakeRollout(c, writer_policy, k), 0).ok());
    }
    auto dir = WriteCheckpoint(root + "/" + writer_kernels, 2, writer_policy,
                               writer.optimizer(), {}, 2);
    ASSERT_TRUE(dir.ok()) << dir.status();
    // A fresh learner of the other path resumes from it and takes the same
    // next step as the writer.
    ActorCritic reader_policy = MakePolicy(Cases()[0]);
    PpoUpdater reader(reader_policy, Ppo(c.ppo), 1 << 16, 2,
                      Kernels(reader_kernels));
    ASSERT_TRUE(
        ReadCheckpoint(*dir, reader_policy, &reader.optimizer(), nullptr).ok());
    reader.generator().set_state(writer.generator().get_state());
    const Rollout next = MakeRollout(c, writer_policy, 77);
    ASSERT_TRUE(writer.Update(next, 0).ok());
    ASSERT_TRUE(reader.Update(next, 0).ok());
    for (const auto& item : writer_policy->named_parameters()) {
      EXPECT_LT(
          MaxRelativeDifference(reader_policy->named_parameters()[item.key()],
                                item.value()),
          1e-5)
          << item.key();
    }
  }
}

}  // namespace
}  // namespace rl
