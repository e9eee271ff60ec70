// L PpoUpdaters joined by a real gloo collective (one thread per rank, on
// loopback), each fed 1/L of the environments, against one PpoUpdater fed
// all of them: after K updates every rank holds the single learner's
// parameters, optimizer-driven and normaliser statistics alike.
//
// Tolerance: 1e-5 relative to the parameter's scale (float32 sums taken in
// another order on each side; float64 in the all-reduce).
#include <torch/types.h>
#include <torch/utils.h>

#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/c10d_collective.h"
#include "learner/collective.h"
#include "learner/ppo_updater.h"
#include "runspec/run_spec.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

constexpr int64_t kSteps = 8;
constexpr int64_t kEnvs = 12;
constexpr int kUpdates = 3;

ActorCriticConfig PolicyConfig() {
  ActorCriticConfig c;
  c.observation_size = 4;
  c.num_actions = 2;
  c.hidden_sizes = {32, 32};
  c.normalize_observations = true;
  return c;
}

PPOConfig Ppo(int num_minibatches = 1) {
  auto spec = LoadRunSpec(
      "env: {id: CartPole-v1}\n"
      "ppo: {learning_rate: 0.003, num_epochs: 3, num_minibatches: " +
          std::to_string(num_minibatches) +
          ",\n"
          "      clip_value_loss: true, max_grad_norm: 0.5, target_kl: 10.0,\n"
          "      normalize_advantages: true, anneal_learning_rate: true}",
      RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec->ppo();
}

// execution.cpu_kernels: fused or libtorch.
ExecutionConfig Kernels(const std::string& kernels) {
  ExecutionConfig execution;
  execution.set_cpu_kernels(kernels);
  return execution;
}

ActorCritic MakePolicy() {
  torch::manual_seed(7);
  auto policy = CreateActorCritic(PolicyConfig());
  EXPECT_TRUE(policy.ok()) << policy.status();
  return *policy;
}

// Rollout `k` of every env, as the single learner's policy would log it.
Rollout MakeRollout(ActorCritic& policy, int k) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(100 + k);
  Rollout r = Rollout::Allocate(kSteps, kEnvs, 4, 0);
  torch::NoGradGuard no_grad;
  r.observations.copy_(torch::randn({kSteps, kEnvs, 4}, gen) * 3 + 1);
  r.actions.copy_(torch::randint(0, 2, {kSteps, kEnvs}, gen));
  const PolicyEvaluation eval = policy->Evaluate(
      r.observations.reshape({-1, 4}), r.actions.reshape({-1}));
  r.log_probs.copy_(eval.log_probs.reshape({kSteps, kEnvs}));
  r.values.copy_(eval.values.reshape({kSteps, kEnvs}));
  r.rewards.copy_(torch::rand({kSteps, kEnvs}, gen) * 2);
  r.terminated.copy_(
      (torch::rand({kSteps, kEnvs}, gen) < 0.1).to(torch::kUInt8));
  r.truncated.copy_(
      (torch::rand({kSteps, kEnvs}, gen) < 0.05).to(torch::kUInt8));
  r.truncated_values.copy_(torch::randn({kSteps, kEnvs}, gen));
  r.next_values.copy_(torch::randn({kEnvs}, gen));
  r.next_observations.copy_(torch::randn({kEnvs, 4}, gen));
  return r;
}

// Envs [start, start + n) of `r`.
Rollout Slice(const Rollout& r, int64_t start, int64_t n) {
  Rollout s;
  auto cut = [&](const torch::Tensor& t) {
    return t.narrow(1, start, n).contiguous();
  };
  s.observations = cut(r.observations);
  s.actions = cut(r.actions);
  s.log_probs = cut(r.log_probs);
  s.values = cut(r.values);
  s.rewards = cut(r.rewards);
  s.terminated = cut(r.terminated);
  s.truncated = cut(r.truncated);
  s.truncated_values = cut(r.truncated_values);
  s.next_observations = r.next_observations.narrow(0, start, n).contiguous();
  s.next_values = r.next_values.narrow(0, start, n).contiguous();
  if (r.alive.defined()) s.alive = cut(r.alive);
  return s;
}

std::vector<torch::Tensor> State(ActorCritic& policy) {
  std::vector<torch::Tensor> all;
  for (const auto& p : policy->parameters()) all.push_back(p.detach().clone());
  for (const auto& b : policy->buffers()) all.push_back(b.detach().clone());
  return all;
}

// Each rank's state after `rollouts` split over a gang of `world` ranks
// (rank r takes envs [r * E / world, (r + 1) * E / world)), every rank's
// in sync with the others'.
std::vector<std::vector<torch::Tensor>> TrainGang(
    int world, const std::string& kernels, const PPOConfig& ppo,
    const std::vector<Rollout>& rollouts, const std::string& gang_id) {
  std::vector<std::vector<torch::Tensor>> got(world);
  auto server = RendezvousServer::Start(0);
  EXPECT_OK(server.status());
  if (!server.ok()) return got;
  // Built here, not in the threads: the global seed is not thread-safe.
  std::vector<ActorCritic> policies;
  for (int rank = 0; rank < world; ++rank) policies.push_back(MakePolicy());
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      CollectiveOptions options;
      options.rank = rank;
      options.world_size = world;
      options.rendezvous_address =
          absl::StrCat("127.0.0.1:", (*server)->port());
      options.gang_id = gang_id;
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<Collective> collective,
                           ConnectCollective(options));
      ActorCritic policy = policies[rank];
      PpoUpdater updater(policy, ppo, 10000, 3, Kernels(kernels));
      updater.set_collective(collective.get());
      const int64_t share = kEnvs / world;
      for (size_t k = 0; k < rollouts.size(); ++k) {
        ASSERT_OK(updater
                      .Update(Slice(rollouts[k], rank * share, share),
                              static_cast<int64_t>(k) * kSteps * kEnvs)
                      .status());
      }
      got[rank] = State(policy);
      ASSERT_OK(CheckInSync(*collective, got[rank], "parameters"));
    });
  }
  for (auto& t : ranks) t.join();
  return got;
}

// Every rank's state within 1e-5 of `want`, relative to the scale.
void ExpectRanksEqual(const std::vector<std::vector<torch::Tensor>>& got,
                      const std::vector<torch::Tensor>& want) {
  for (size_t rank = 0; rank < got.size(); ++rank) {
    ASSERT_EQ(got[rank].size(), want.size()) << "rank " << rank;
    for (size_t i = 0; i < want.size(); ++i) {
      const torch::Tensor a = got[rank][i].to(torch::kFloat64);
      const torch::Tensor b = want[i].to(torch::kFloat64);
      const double scale = std::max(1.0, b.abs().max().item<double>());
      const double diff = (a - b).abs().max().item<double>();
      EXPECT_LE(diff, 1e-5 * scale)
          << "rank " << rank << " of " << got.size() << ", tensor " << i;
    }
  }
}

// (world size, CPU kernels): both paths all-reduce their gradients.
class DistributedUpdateTest
    : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(DistributedUpdateTest, EqualsOneLearnerOnAllTheData) {
  const int world = std::get<0>(GetParam());
  const std::string kernels = std::get<1>(GetParam());
  // The single learner, and the rollouts it would have collected.
  ActorCritic single = MakePolicy();
  PpoUpdater single_updater(single, Ppo(), 10000, 3, Kernels(kernels));
  std::vector<Rollout> rollouts;
  for (int k = 0; k < kUpdates; ++k) {
    rollouts.push_back(MakeRollout(single, k));
    ASSERT_OK(
        single_updater.Update(rollouts.back(), k * kSteps * kEnvs).status());
  }
  const std::vector<torch::Tensor> want = State(single);
  ExpectRanksEqual(
      TrainGang(world, kernels, Ppo(), rollouts,
                absl::StrCat("updater-test/", world, "/", kernels)),
      want);
  // The update moved the parameters: the comparison is not vacuous.
  ActorCritic initial = MakePolicy();
  EXPECT_GT((State(initial)[0] - want[0]).abs().max().item<double>(), 1e-3);
}

// Agents that leave early (env.agents_leave): each rank's rows weigh by
// rollout.alive, so the ranks' gradients weigh by their alive rows and the
// advantage and observation moments count the alive rows alone. Update 1
// leaves the first half of the envs (rank 0's slice, and more) nothing but
// padding; padding observations are wild, so counting one would show.
class AliveDistributedUpdateTest : public DistributedUpdateTest {};

Rollout WithPadding(Rollout r, int k) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(200 + k);
  torch::Tensor alive =
      (torch::rand({kSteps, kEnvs}, gen) < (k == 2 ? 0.4 : 0.7))
          .to(torch::kUInt8);
  if (k == 1) alive.narrow(1, 0, kEnvs / 2).zero_();
  r.alive = alive;
  r.observations.masked_fill_((alive == 0).unsqueeze(-1), 1e4);
  return r;
}

TEST_P(AliveDistributedUpdateTest, EqualsOneLearnerOnAllTheData) {
  const int world = std::get<0>(GetParam());
  const std::string kernels = std::get<1>(GetParam());
  ActorCritic single = MakePolicy();
  PpoUpdater single_updater(single, Ppo(), 10000, 3, Kernels(kernels));
  std::vector<Rollout> rollouts;
  for (int k = 0; k < kUpdates; ++k) {
    rollouts.push_back(WithPadding(MakeRollout(single, k), k));
    ASSERT_OK(
        single_updater.Update(rollouts.back(), k * kSteps * kEnvs).status());
  }
  ExpectRanksEqual(
      TrainGang(world, kernels, Ppo(), rollouts,
                absl::StrCat("alive-updater-test/", world, "/", kernels)),
      State(single));
  // The observation statistics kept out the padding's wild 1e4.
  for (const auto& b : single->buffers()) {
    EXPECT_LT(b.abs().max().item<double>(), 1e3);
  }
}

// The same with 2 minibatches an epoch, where one learner's shuffle is not
// the gang's: each minibatch's alive rows and shares (plan index e * 2 + m)
// in a gang of the fused kernels and one of LibTorch give one update.
TEST(AliveGangTest, FusedAndLibTorchGangsAgreeMinibatchByMinibatch) {
  ActorCritic source = MakePolicy();
  std::vector<Rollout> rollouts;
  for (int k = 0; k < kUpdates; ++k) {
    rollouts.push_back(WithPadding(MakeRollout(source, k), k));
  }
  const auto fused =
      TrainGang(2, "fused", Ppo(2), rollouts, "alive-minibatches/fused");
  const auto libtorch =
      TrainGang(2, "libtorch", Ppo(2), rollouts, "alive-minibatches/libtorch");
  ASSERT_EQ(libtorch.size(), 2u);
  ExpectRanksEqual(fused, libtorch[0]);
  EXPECT_GT((State(source)[0] - libtorch[0][0]).abs().max().item<double>(),
            1e-3);
}

// Both suites over 2 and 3 ranks on both CPU paths ("2RanksFused", ...).
const auto kRanksAndKernels = ::testing::Combine(
    ::testing::Values(2, 3), ::testing::Values("fused", "libtorch"));

std::string RanksAndKernelsName(
    const ::testing::TestParamInfo<std::tuple<int, std::string>>& info) {
  return absl::StrCat(
      std::get<0>(info.param), "Ranks",
      std::get<1>(info.param) == "fused" ? "Fused" : "LibTorch");
}

INSTANTIATE_TEST_SUITE_P(TwoAndThreeRanks, AliveDistributedUpdateTest,
                         kRanksAndKernels, RanksAndKernelsName);
INSTANTIATE_TEST_SUITE_P(TwoAndThreeRanks, DistributedUpdateTest,
                         kRanksAndKernels, RanksAndKernelsName);

}  // namespace
}  // namespace rl
