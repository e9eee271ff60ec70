#include "learner/ppo_updater.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runspec/run_spec.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// A contextual bandit as one-step episodes: reward 1 when the action equals
// (obs[0] > 0), every step terminates. T=4, E=64.
struct Bandit {
  ActorCritic policy{nullptr};
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);

  explicit Bandit(bool normalize = false) {
    ActorCriticConfig c;
    c.observation_size = 2;
    c.num_actions = 2;
    c.hidden_sizes = {16};
    c.normalize_observations = normalize;
    torch::manual_seed(0);
    policy = ActorCritic(c);
  }

  Rollout Collect(double* mean_reward) {
    Rollout r = Rollout::Allocate(4, 64, 2, 0);
    torch::NoGradGuard no_grad;
    r.observations.copy_(torch::randn({4, 64, 2}, gen) * 2 + 1);
    const PolicyStep step = policy->Act(r.observations.reshape({256, 2}), gen);
    r.actions.copy_(step.actions.reshape({4, 64}));
    r.log_probs.copy_(step.log_probs.reshape({4, 64}));
    r.values.copy_(step.values.reshape({4, 64}));
    const torch::Tensor correct =
        (r.observations.select(2, 0) > 1).to(torch::kInt64);  // mean is 1
    r.rewards.copy_((r.actions == correct).to(torch::kFloat32));
    r.terminated.fill_(1);
    *mean_reward = r.rewards.mean().item<double>();
    return r;
  }
};

PPOConfig Ppo(const std::string& yaml) {
  auto spec =
      LoadRunSpec("env: {id: CartPole-v1}\nppo: " + yaml, RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec->ppo();
}

ExecutionConfig Execution(const std::string& yaml) {
  auto spec = LoadRunSpec("env: {id: CartPole-v1}\nexecution: " + yaml,
                          RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec->execution();
}

TEST(PpoUpdaterTest, LearnsABandit) {
  Bandit bandit;
  PpoUpdater updater(bandit.policy,
                     Ppo("{learning_rate: 0.01, num_minibatches: 4, "
                         "anneal_learning_rate: false}"),
                     1 << 20, 1, Execution("{}"));
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    Rollout r = bandit.Collect(i == 0 ? &first : &last);
    auto update = updater.Update(r, 0);
    ASSERT_TRUE(update.ok()) << update.status();
    const UpdateStats& stats = *update;
    for (double v : {stats.policy_loss, stats.value_loss, stats.entropy,
                     stats.approx_kl, stats.grad_norm}) {
      ASSERT_TRUE(std::isfinite(v));
    }
    EXPECT_EQ(stats.epochs, 4);
    EXPECT_GE(stats.clip_fraction, 0);
    EXPECT_LE(stats.clip_fraction, 1);
  }
  EXPECT_LT(first, 0.7);
  EXPECT_GT(last, 0.9);
}

TEST(PpoUpdaterTest, WholeCopiesKeepEachCopysRowsTogether) {
  EXPECT_TRUE(torch::equal(WholeCopies(torch::tensor({2, 0, 1}), 2),
                           torch::tensor({4, 5, 0, 1, 2, 3})));
  EXPECT_TRUE(torch::equal(WholeCopies(torch::tensor({1, 0}), 1),
                           torch::tensor({1, 0})));
}

// Copies of 2 agents, one-step episodes where each agent is paid the
// other's first observation (a standard normal): a return only a critic
// that reads the other agent sees. The value error of a policy of `c` (2
// observations, 2 actions) after 60 updates on such rollouts: to an
// independent critic every return is noise of variance 1. T steps of E
// envs per rollout.
double ValueErrorWhenPaidTheOthersObservation(ActorCriticConfig c, int64_t T,
                                              int64_t E) {
  c.observation_size = 2;
  c.num_actions = 2;
  torch::manual_seed(3);
  ActorCritic policy(c);
  PpoUpdater updater(policy,
                     Ppo("{learning_rate: 0.003, num_minibatches: 4, "
                         "num_epochs: 8, clip_value_loss: false, "
                         "anneal_learning_rate: false}"),
                     1 << 20, 1, Execution("{}"));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  double error = 0;
  for (int i = 0; i < 60; ++i) {
    Rollout r = Rollout::Allocate(T, E, 2, 0, 0, 0, torch::kFloat32,
                                  policy->state_size());
    r.observations.copy_(torch::randn({T, E, 2}, gen));
    // Every step ends an episode (a recurrent one acts from a zero state).
    r.terminated.fill_(1);
    PolicyStep step;
    {
      torch::NoGradGuard no_grad;
      torch::Tensor state = policy->InitialState(T * E);
      step = policy->Act(r.observations.reshape({T * E, 2}), gen, false, {},
                         state.defined() ? &state : nullptr);
    }
    r.actions.copy_(step.actions.reshape({T, E}));
    r.log_probs.copy_(step.log_probs.reshape({T, E}));
    r.values.copy_(step.values.reshape({T, E}));
    // Agent k of copy c is row 2c + k; the other is row 2c + 1 - k.
    r.rewards.copy_(r.observations.select(2, 0)
                        .reshape({T, E / 2, 2})
                        .flip(2)
                        .reshape({T, E}));
    error =
        (step.values.reshape({T, E}) - r.rewards).pow(2).mean().item<double>();
    EXPECT_OK(updater.Update(r, 0).status());
  }
  return error;
}

// Minibatches of whole copies let the central critic
// (policy.central_value) learn it: its value error ends far below the
// independent critic's.
TEST(PpoUpdaterTest, ACentralCriticLearnsWhatOnlyAnotherAgentSees) {
  ActorCriticConfig c;
  c.hidden_sizes = {32, 32};
  const double independent = ValueErrorWhenPaidTheOthersObservation(c, 4, 64);
  c.central_value_agents = 2;
  const double central = ValueErrorWhenPaidTheOthersObservation(c, 4, 64);
  EXPECT_GT(independent, 0.7);
  EXPECT_LT(central, 0.1);
}

// The same beside a recurrent core: the value head reads the copy's core
// outputs, and the minibatches of whole env sequences hold whole copies
// (copies split apart would pair each agent with a stranger's sequence).
TEST(PpoUpdaterTest, ACentralCriticBesideACoreLearnsWhatOnlyAnotherAgentSees) {
  ActorCriticConfig c;
  c.hidden_sizes = {32};
  c.core = ActorCriticConfig::Core::kGru;
  c.core_size = 32;
  // One intra-op thread: two spin-wait on a loaded machine (several
  // minutes instead of seconds), and these small sequences gain nothing.
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const double independent = ValueErrorWhenPaidTheOthersObservation(c, 4, 64);
  c.central_value_agents = 2;
  const double central = ValueErrorWhenPaidTheOthersObservation(c, 4, 64);
  torch::set_num_threads(threads);
  EXPECT_GT(independent, 0.7);
  EXPECT_LT(central, 0.1);
}

// 8 minibatches split 8 env sequences, but not their 4 copies.
TEST(PpoUpdaterTest, ACentralCriticBesideACoreRefusesSplitCopies) {
  ActorCriticConfig c;
  c.observation_size = 2;
  c.num_actions = 2;
  c.core = ActorCriticConfig::Core::kLstm;
  c.core_size = 4;
  c.central_value_agents = 2;
  ActorCritic policy(c);
  PpoUpdater updater(policy, Ppo("{num_minibatches: 8}"), 1 << 16, 1,
                     Execution("{}"));
  Rollout r = Rollout::Allocate(3, 8, 2, 0, 0, 0, torch::kFloat32,
                                policy->state_size());
  EXPECT_THAT(updater.Update(r, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("minibatches of whole copies of 2 agents (a "
                                 "central critic, policy.central_value, "
                                 "beside a recurrent core")));
}

// The fused minibatches leave out the rows of agents that left, and a
// central critic reads whole copies: with such rows its updates run on
// LibTorch's kernels (auto), or are refused (fused).
TEST(PpoUpdaterTest, ACentralCriticBesideAgentsThatLeaveUpdatesOnLibTorch) {
  ActorCriticConfig c;
  c.observation_size = 3;
  c.num_actions = 2;
  c.hidden_sizes = {8};
  c.central_value_agents = 2;
  const int64_t T = 2, E = 8;
  torch::manual_seed(4);
  ActorCritic policy(c);
  Rollout r = Rollout::Allocate(T, E, 3, 0);
  r.observations.copy_(torch::randn({T, E, 3}));
  {
    torch::NoGradGuard no_grad;
    const PolicyStep step =
        policy->Act(r.observations.reshape({T * E, 3}), c10::nullopt);
    r.actions.copy_(step.actions.reshape({T, E}));
    r.log_probs.copy_(step.log_probs.reshape({T, E}));
    r.values.copy_(step.values.reshape({T, E}));
  }
  r.rewards.copy_(torch::randn({T, E}));
  r.alive = torch::ones({T, E}, torch::kUInt8);
  r.alive[1][3] = 0;  // Agent 1 of copy 1 left after the first step.
  const PPOConfig ppo = Ppo("{num_minibatches: 2}");
  PpoUpdater automatic(policy, ppo, 1 << 16, 1, Execution("{}"));
  EXPECT_OK(automatic.Update(r, 0).status());
  EXPECT_FALSE(automatic.fused());
  PpoUpdater fused(policy, ppo, 1 << 16, 1, Execution("{cpu_kernels: fused}"));
  const absl::Status refused = fused.Update(r, 0).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(),
              HasSubstr("execution.cpu_kernels: fused: a central critic "
                        "(policy.central_value) values whole copies"));
  // Every row alive: the fused kernels run it.
  r.alive = torch::Tensor();
  PpoUpdater whole(policy, ppo, 1 << 16, 1, Execution("{}"));
  EXPECT_OK(whole.Update(r, 0).status());
  EXPECT_TRUE(whole.fused());
}

// execution.cuda_graphs's path (learner/ppo_graphed_step.cc) through the CPU
// stand-in of a CUDA graph: its steps read and write tensors that stay put,
// into which each update copies its rollout and each minibatch its rows, and a
// replay runs only what was captured. Three annealed updates of 4 epochs x
// 4 minibatches (2 warm-ups, a capture, then replays) give what the eager
// path gives, and the bandit is learned.
TEST(PpoUpdaterTest, AGraphedUpdateIsTheEagerOne) {
  Bandit eager_bandit, graphed_bandit;
  const PPOConfig ppo =
      Ppo("{learning_rate: 0.01, num_minibatches: 4, target_kl: 0.5}");
  const ExecutionConfig libtorch = Execution("{cpu_kernels: libtorch}");
  PpoUpdater eager(eager_bandit.policy, ppo, 4096, 1, libtorch);
  PpoUpdater graphed(graphed_bandit.policy, ppo, 4096, 1, libtorch);
  graphed.UseDeferredGraphsForTesting();
  for (int i = 0; i < 3; ++i) {
    double unused;
    const Rollout r = eager_bandit.Collect(&unused);
    ASSERT_OK_AND_ASSIGN(const UpdateStats want, eager.Update(r, 256 * i));
    ASSERT_OK_AND_ASSIGN(const UpdateStats got, graphed.Update(r, 256 * i));
    EXPECT_FALSE(eager.cuda_graphs());
    EXPECT_TRUE(graphed.cuda_graphs());
    EXPECT_EQ(got.epochs, want.epochs);
    EXPECT_NEAR(got.policy_loss, want.policy_loss, 1e-5) << "update " << i;
    EXPECT_NEAR(got.approx_kl, want.approx_kl, 1e-6) << "update " << i;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-5) << "update " << i;
    EXPECT_NEAR(got.learning_rate, want.learning_rate, 1e-12);
    const auto a = eager_bandit.policy->parameters();
    const auto b = graphed_bandit.policy->parameters();
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_TRUE(torch::allclose(a[k], b[k], 1e-5, 1e-6))
          << "parameter " << k << " after update " << i;
    }
    // The host's Adam counts follow the replayed steps.
    EXPECT_EQ(AdamStateFor(graphed.optimizer(), b[0]).step(),
              AdamStateFor(eager.optimizer(), a[0]).step());
  }
  // A capture that fails: auto runs that minibatch and the rest eagerly
  // (the same update), on refuses.
  Bandit a, b;
  PpoUpdater plain(a.policy, ppo, 4096, 1, libtorch);
  PpoUpdater failing(b.policy, ppo, 4096, 1, libtorch);
  failing.UseDeferredGraphsForTesting(/*fail_capture=*/true);
  double reward;
  const Rollout r = a.Collect(&reward);
  ASSERT_OK(plain.Update(r, 0).status());
  ASSERT_OK(failing.Update(r, 0).status());
  EXPECT_FALSE(failing.cuda_graphs());
  for (size_t k = 0; k < a.policy->parameters().size(); ++k) {
    EXPECT_TRUE(torch::allclose(a.policy->parameters()[k],
                                b.policy->parameters()[k], 1e-5, 1e-6));
  }
  ExecutionConfig strict = libtorch;
  strict.set_cuda_graphs("on");
  Bandit c;
  PpoUpdater refusing(c.policy, ppo, 4096, 1, strict);
  refusing.UseDeferredGraphsForTesting(/*fail_capture=*/true);
  EXPECT_THAT(refusing.Update(r, 0).status().message(),
              HasSubstr("failed for a test"));

  // execution.cuda_graphs: on where nothing can be captured is refused.
  Bandit cpu_bandit;
  ExecutionConfig on = libtorch;
  on.set_cuda_graphs("on");
  PpoUpdater on_cpu(cpu_bandit.policy, Ppo("{}"), 4096, 1, on);
  double unused;
  EXPECT_THAT(
      on_cpu.Update(cpu_bandit.Collect(&unused), 0).status().message(),
      HasSubstr("execution.cuda_graphs: on, but the update runs on cpu"));
}

// Agents that leave early: padding rows weigh nothing. Envs 32-63 of a
// rollout are padding throughout, filled with wild observations, values,
// log-probabilities and rewards; the update moves the weights (and the
// observation statistics) exactly as an update of envs 0-31 alone.
TEST(PpoUpdaterTest, PaddingRowsOfAgentsThatLeftWeighNothing) {
  Bandit with(/*normalize=*/true), without(/*normalize=*/true);
  double unused;
  Rollout r = with.Collect(&unused);
  Rollout alone = r.Rows(torch::arange(32));
  r.alive = torch::ones({4, 64}, torch::kUInt8);
  r.alive.narrow(1, 32, 32).zero_();
  r.observations.narrow(1, 32, 32).fill_(1000);
  r.values.narrow(1, 32, 32).fill_(-500);
  r.log_probs.narrow(1, 32, 32).fill_(-30);
  r.rewards.narrow(1, 32, 32).fill_(77);
  const PPOConfig ppo = Ppo("{learning_rate: 0.01, num_minibatches: 1}");
  const ExecutionConfig libtorch = Execution("{cpu_kernels: libtorch}");
  // auto: the fused CPU path weighs no rows, so LibTorch runs the update.
  PpoUpdater weighted(with.policy, ppo, 4096, 1, Execution("{}"));
  PpoUpdater plain(without.policy, ppo, 4096, 1, libtorch);
  ASSERT_OK_AND_ASSIGN(const UpdateStats got, weighted.Update(r, 0));
  ASSERT_OK_AND_ASSIGN(const UpdateStats want, plain.Update(alone, 0));
  EXPECT_NEAR(got.policy_loss, want.policy_loss, 1e-5);
  EXPECT_NEAR(got.value_loss, want.value_loss, 1e-5);
  EXPECT_NEAR(got.entropy, want.entropy, 1e-5);
  EXPECT_NEAR(got.explained_variance, want.explained_variance, 1e-5);
  const auto a = with.policy->named_parameters();
  const auto b = without.policy->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(torch::allclose(a[k].value(), b[k].value(), 1e-4, 1e-5))
        << a[k].key();
  }
  const auto sa = with.policy->named_buffers();
  const auto sb = without.policy->named_buffers();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t k = 0; k < sa.size(); ++k) {
    EXPECT_TRUE(torch::allclose(sa[k].value().to(torch::kFloat64),
                                sb[k].value().to(torch::kFloat64), 1e-5, 1e-6))
        << "observation statistics " << sa[k].key();
  }
  // Minibatches of padding only are skipped: a rollout of nothing but
  // padding leaves the weights and the statistics as they were.
  Bandit idle(/*normalize=*/true);
  PpoUpdater idle_updater(idle.policy, Ppo("{num_minibatches: 4}"), 4096, 1,
                          Execution("{}"));
  Rollout nothing = idle.Collect(&unused);
  nothing.alive = torch::zeros({4, 64}, torch::kUInt8);
  std::vector<torch::Tensor> before;
  for (const auto& p : idle.policy->parameters()) before.push_back(p.clone());
  for (const auto& b : idle.policy->buffers()) before.push_back(b.clone());
  ASSERT_OK_AND_ASSIGN(const UpdateStats none, idle_updater.Update(nothing, 0));
  EXPECT_EQ(none.explained_variance, 0);
  size_t k = 0;
  for (const auto& p : idle.policy->parameters()) {
    EXPECT_TRUE(torch::equal(p, before[k++])) << "parameter " << k;
  }
  for (const auto& b : idle.policy->buffers()) {
    EXPECT_TRUE(torch::equal(b, before[k++])) << "buffer " << k;
  }
  // The fused CPU path leaves the padding rows out as it gathers a
  // minibatch: the same update as the fused path's of envs 0-31 alone.
  Bandit fused_with(/*normalize=*/true), fused_without(/*normalize=*/true);
  Rollout fr = fused_with.Collect(&unused);
  Rollout fused_alone = fr.Rows(torch::arange(32));
  fr.alive = r.alive.clone();
  fr.observations.narrow(1, 32, 32).fill_(1000);
  fr.values.narrow(1, 32, 32).fill_(-500);
  fr.log_probs.narrow(1, 32, 32).fill_(-30);
  fr.rewards.narrow(1, 32, 32).fill_(77);
  const ExecutionConfig fused_kernels = Execution("{cpu_kernels: fused}");
  PpoUpdater fused(fused_with.policy, ppo, 4096, 1, fused_kernels);
  PpoUpdater fused_plain(fused_without.policy, ppo, 4096, 1, fused_kernels);
  ASSERT_OK_AND_ASSIGN(const UpdateStats fused_got, fused.Update(fr, 0));
  ASSERT_OK_AND_ASSIGN(const UpdateStats fused_want,
                       fused_plain.Update(fused_alone, 0));
  EXPECT_NEAR(fused_got.explained_variance, fused_want.explained_variance,
              1e-5);
  const auto fa = fused_with.policy->named_parameters();
  const auto fb = fused_without.policy->named_parameters();
  for (size_t k = 0; k < fa.size(); ++k) {
    EXPECT_TRUE(torch::allclose(fa[k].value(), fb[k].value(), 1e-4, 1e-5))
        << "fused " << fa[k].key();
  }
  const auto fsa = fused_with.policy->named_buffers();
  const auto fsb = fused_without.policy->named_buffers();
  for (size_t k = 0; k < fsa.size(); ++k) {
    EXPECT_TRUE(torch::allclose(fsa[k].value().to(torch::kFloat64),
                                fsb[k].value().to(torch::kFloat64), 1e-5, 1e-6))
        << "fused observation statistics " << fsa[k].key();
  }
  // And it weighs as the LibTorch path does (one minibatch each).
  Bandit fused_one(/*normalize=*/true);
  PpoUpdater fused_single(fused_one.policy, ppo, 4096, 1, fused_kernels);
  ASSERT_OK(fused_single.Update(r, 0).status());
  const auto fo = fused_one.policy->named_parameters();
  for (size_t k = 0; k < fo.size(); ++k) {
    EXPECT_TRUE(torch::allclose(fo[k].value(), a[k].value(), 1e-4, 1e-5))
        << "fused against LibTorch " << fo[k].key();
  }
}

TEST(PpoUpdaterTest, AnnealsTheLearningRate) {
  Bandit bandit;
  PpoUpdater updater(bandit.policy, Ppo("{learning_rate: 0.001}"), 1000, 1,
                     Execution("{}"));
  double unused;
  Rollout r = bandit.Collect(&unused);
  EXPECT_NEAR(updater.Update(r, 0)->learning_rate, 0.001, 1e-9);
  EXPECT_NEAR(updater.Update(r, 750)->learning_rate, 0.00025, 1e-9);
}

TEST(PpoUpdaterTest, StopsEarlyOnKl) {
  Bandit bandit;
  PpoUpdater updater(bandit.policy,
                     Ppo("{learning_rate: 0.05, num_epochs: 10, "
                         "target_kl: 0.000001}"),
                     1 << 20, 1, Execution("{}"));
  double unused;
  Rollout r = bandit.Collect(&unused);
  EXPECT_EQ(updater.Update(r, 0)->epochs, 1);
}

TEST(PpoUpdaterTest, GradientNormIsClipped) {
  Bandit bandit;
  // With a huge learning rate the parameters would explode without clipping;
  // with max_grad_norm the step of each minibatch is bounded.
  PpoUpdater updater(bandit.policy,
                     Ppo("{learning_rate: 0.001, max_grad_norm: 0.0001, "
                         "anneal_learning_rate: false}"),
                     1 << 20, 1, Execution("{}"));
  std::vector<torch::Tensor> before;
  for (const auto& p : bandit.policy->parameters()) before.push_back(p.clone());
  double unused;
  Rollout r = bandit.Collect(&unused);
  auto stats = updater.Update(r, 0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->grad_norm, 0.0001);  // reported norm is before clipping
  // Adam normalises step sizes, so check the update is still finite/sane.
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(
        torch::isfinite(bandit.policy->parameters()[i]).all().item<bool>());
  }
}

TEST(PpoUpdaterTest, UpdatesObservationStatisticsAfterTheUpdate) {
  Bandit bandit(/*normalize=*/true);
  PpoUpdater updater(bandit.policy, Ppo("{}"), 1 << 20, 1, Execution("{}"));
  double unused;
  Rollout r = bandit.Collect(&unused);
  ASSERT_TRUE(updater.Update(r, 0).ok());
  const auto buffers = bandit.policy->named_buffers();
  // Observations were drawn with mean (1, 1).
  EXPECT_NEAR(buffers["obs_mean"][0].item<double>(), 1.0, 0.4);
  EXPECT_GT(buffers["obs_count"].item<double>(), 255);
}

std::vector<torch::Tensor> Snapshot(ActorCritic& policy) {
  std::vector<torch::Tensor> state;
  for (const auto& p : policy->parameters()) state.push_back(p.clone());
  for (const auto& b : policy->buffers()) state.push_back(b.clone());
  return state;
}

bool Unchanged(ActorCritic& policy, const std::vector<torch::Tensor>& before) {
  const std::vector<torch::Tensor> now = Snapshot(policy);
  for (size_t i = 0; i < now.size(); ++i) {
    if (!torch::equal(now[i], before[i])) return false;
  }
  return true;
}

// NaN in what an actor sent is the batch's fault: INVALID_ARGUMENT naming
// the tensor, returned (not thrown, not aborted) before anything changed.
TEST(PpoUpdaterTest, NonFiniteBatchIsAnErrorStatusAndChangesNothing) {
  Bandit bandit(/*normalize=*/true);
  PpoUpdater updater(bandit.policy, Ppo("{}"), 1 << 20, 1, Execution("{}"));
  double unused;
  const std::vector<torch::Tensor> before = Snapshot(bandit.policy);

  Rollout nan_obs = bandit.Collect(&unused);
  nan_obs.observations[2][7][1] = std::numeric_limits<float>::quiet_NaN();
  auto update = updater.Update(nan_obs, 0);
  EXPECT_EQ(update.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("rollout.observations: values must be finite"));

  Rollout inf_reward = bandit.Collect(&unused);
  inf_reward.rewards[0][0] = std::numeric_limits<float>::infinity();
  update = updater.Update(inf_reward, 0);
  EXPECT_EQ(update.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("rollout.rewards: values must be finite"));

  EXPECT_TRUE(Unchanged(bandit.policy, before));
  // The updater is still usable afterwards.
  EXPECT_TRUE(updater.Update(bandit.Collect(&unused), 0).ok());
}

TEST(PpoUpdaterTest, MisshapedBatchIsAnErrorStatusNamingTheShapes) {
  Bandit bandit;
  PpoUpdater updater(bandit.policy, Ppo("{}"), 1 << 20, 1, Execution("{}"));
  double unused;
  const std::vector<torch::Tensor> before = Snapshot(bandit.policy);

  // Observations of 3 values for a policy of 2: the first matrix product
  // would throw inside LibTorch.
  Rollout wide = Rollout::Allocate(4, 64, 3, 0);
  auto update = updater.Update(wide, 0);
  EXPECT_EQ(update.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("rollout.observations: expected Float[4, 64, 2], got "
                        "Float[4, 64, 3]"));

  Rollout continuous = Rollout::Allocate(4, 64, 2, 1);
  update = updater.Update(continuous, 0);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("rollout.actions: expected Long[4, 64], got "
                        "Float[4, 64, 1]"));

  Rollout short_values = bandit.Collect(&unused);
  short_values.values = short_values.values.narrow(1, 0, 10);
  update = updater.Update(short_values, 0);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("rollout.values: expected Float[4, 64], got "
                        "Float[4, 10]"));

  Rollout bad_action = bandit.Collect(&unused);
  bad_action.actions[1][1] = 2;  // of 2 actions
  update = updater.Update(bad_action, 0);
  EXPECT_EQ(update.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("rollout.actions: must be in [0, 2)"));

  Rollout unallocated;
  update = updater.Update(unallocated, 0);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("rollout.rewards: expected Float[-1, -1], got "
                        "undefined"));

  Rollout strided = bandit.Collect(&unused);
  strided.rewards = strided.rewards.t().contiguous().t();
  update = updater.Update(strided, 0);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("rollout.rewards: must be a contiguous tensor on cpu"));

  EXPECT_TRUE(Unchanged(bandit.policy, before));
}

// Finite inputs, but a loss that overflows float: an error Status, and the
// minibatches' gradients are not applied, so the weights stay finite.
TEST(PpoUpdaterTest, NonFiniteLossIsAnErrorStatusAndTheWeightsStayFinite) {
  Bandit bandit(/*normalize=*/true);
  PpoUpdater updater(bandit.policy, Ppo("{value_coef: 1.0e+38}"), 1 << 20, 1,
                     Execution("{}"));
  double unused;
  Rollout r = bandit.Collect(&unused);
  r.rewards.mul_(100);  // returns far from the initial values
  const torch::Tensor obs_mean = bandit.policy->named_buffers()["obs_mean"];
  const torch::Tensor mean_before = obs_mean.clone();
  auto update = updater.Update(r, 0);
  EXPECT_EQ(update.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("PPO update: the loss or gradient was not finite"));
  for (const auto& p : bandit.policy->parameters()) {
    EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
  }
  EXPECT_TRUE(torch::equal(obs_mean, mean_before));
}

// A finite reward so large (3e38, float's maximum is 3.4e38) that the
// value loss overflows: the update is skipped and reported, training goes
// on, and only max_nonfinite_updates such updates in a row are an error.
TEST(PpoUpdaterTest, NonFiniteUpdatesAreSkippedUntilTooManyInARow) {
  Bandit bandit(/*normalize=*/true);
  PpoUpdater updater(bandit.policy, Ppo("{}"), 1 << 20, 1, Execution("{}"));
  updater.set_max_nonfinite_updates(3);
  double unused;
  auto huge_reward = [&] {
    Rollout r = bandit.Collect(&unused);
    r.rewards[1][5] = 3e38f;
    return r;
  };
  auto all_finite = [&] {
    for (const auto& p : bandit.policy->parameters()) {
      if (!torch::isfinite(p).all().item<bool>()) return false;
    }
    return true;
  };
  const torch::Tensor obs_count = bandit.policy->named_buffers()["obs_count"];
  const torch::Tensor count_before = obs_count.clone();

  auto update = updater.Update(huge_reward(), 0);
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_GE(update->nonfinite_minibatches, 1);
  EXPECT_EQ(update->consecutive_nonfinite_updates, 1);
  EXPECT_TRUE(all_finite());
  EXPECT_TRUE(torch::equal(obs_count, count_before));  // not folded in

  // A good rollout trains normally and ends the streak.
  update = updater.Update(bandit.Collect(&unused), 0);
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->nonfinite_minibatches, 0);
  EXPECT_EQ(update->consecutive_nonfinite_updates, 0);
  EXPECT_GT(obs_count.item<double>(), count_before.item<double>());

  for (int i = 1; i <= 2; ++i) {
    update = updater.Update(huge_reward(), 0);
    ASSERT_TRUE(update.ok()) << update.status();
    EXPECT_EQ(update->consecutive_nonfinite_updates, i);
  }
  update = updater.Update(huge_reward(), 0);
  EXPECT_EQ(update.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("PPO update: the loss or gradient was not finite"));
  EXPECT_THAT(std::string(update.status().message()),
              HasSubstr("3 updates in a row had non-finite minibatches"));
  EXPECT_TRUE(all_finite());
}

}  // namespace
}  // namespace rl
