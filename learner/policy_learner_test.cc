#include "learner/policy_learner.h"

#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/grpc_util.h"
#include "gtest/gtest.h"
#include "learner/c10d_collective.h"
#include "learner/learner_service.h"
#include "learner/learner_workload.h"
#include "learner/other_policies.h"
#include "learner/policy_learner_client.h"
#include "learner/policy_learner_service.h"
#include "policy/policy_codec.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"
#include "runspec/named_policies.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

constexpr char kRun[] = "duel-run";
constexpr char kKey[] = "the-run-key";

// Duel-v0 (2 agents) in 8 rows; red plays agent 0 (the run's own learner's),
// blue agent 1 (a learner of its own in these tests).
RunSpec TwoPolicies() {
  return SmallRunSpec(
      "env: {id: Duel-v0, plugin: duel, agents_per_env: 2, "
      "observation_size: 4, num_discrete_actions: 2, reward_low: -1, "
      "reward_high: 1}\n"
      "envs_per_actor: 8\nsegment_length: 4\n"
      "ppo: {num_minibatches: 2, num_epochs: 2}\n"
      "policies: [{name: red, agents: [0]},\n"
      "  {name: blue, agents: [1], policy: {hidden_sizes: [8]}}]\n");
}

// A batch of every row, as the run's learner has it: random observations,
// rewards and episode ends (seeded).
Rollout Batch(uint64_t seed, int64_t rows = 8) {
  torch::manual_seed(seed);
  const int64_t T = 4;
  Rollout r;
  r.observations = torch::randn({T, rows, 4});
  r.actions = torch::randint(0, 2, {T, rows}, torch::kInt64);
  r.log_probs = torch::full({T, rows}, std::log(0.5f));
  r.values = torch::randn({T, rows});
  r.rewards = torch::randint(-1, 2, {T, rows}).to(torch::kFloat32);
  r.terminated = torch::randint(0, 2, {T, rows}).to(torch::kUInt8);
  r.truncated = torch::zeros({T, rows}, torch::kUInt8);
  r.truncated_values = torch::zeros({T, rows});
  r.next_observations = torch::randn({rows, 4});
  r.next_values = torch::randn({rows});
  return r;
}

absl::StatusOr<Rollout> Same(Rollout r) { return r; }

std::vector<torch::Tensor> Weights(const ActorCritic& policy) {
  std::vector<torch::Tensor> out;
  for (const auto& p : policy->named_parameters()) {
    out.push_back(p.value().detach().clone());
  }
  return out;
}

bool Equal(const std::vector<torch::Tensor>& a,
           const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

// Blue's learner of its own, served on a real port of this host.
struct BlueLearner {
  std::shared_ptr<PolicyLearner> learner;
  PolicyLearnerServiceImpl service;
  RunningServer server;
  std::string address;
};

std::unique_ptr<BlueLearner> StartBlue(const std::string& run_dir) {
  auto blue = std::make_unique<BlueLearner>();
  PolicyLearnerOptions options;
  options.spec = TwoPolicies();
  options.run_id = kRun;
  options.policy = "blue";
  options.run_dir = run_dir;
  absl::StatusOr<std::unique_ptr<PolicyLearner>> learner =
      PolicyLearner::Create(options);
  EXPECT_OK(learner.status());
  if (!learner.ok()) return nullptr;
  blue->learner = *std::move(learner);
  blue->service.SetLearner(blue->learner, kKey);
  ServerOptions server_options;
  server_options.max_receive_message_bytes = 64 << 20;
  absl::StatusOr<RunningServer> server =
      StartServer({&blue->service}, server_options);
  EXPECT_OK(server.status());
  if (!server.ok()) return nullptr;
  blue->server = *std::move(server);
  blue->address = absl::StrCat("127.0.0.1:", blue->server.port);
  return blue;
}

PolicyLearnerClientOptions Caller(const std::string& address,
                                  const std::string& policy,
                                  const std::string& key) {
  PolicyLearnerClientOptions o;
  o.address = address;
  o.run_id = kRun;
  o.policy = policy;
  o.run_key = key;
  o.deadline = absl::Seconds(60);
  o.ready_timeout = absl::Seconds(1);
  return o;
}

OtherPolicies::Remotes BlueAt(const std::string& address,
                              const std::string& key = kKey) {
  OtherPolicies::Remotes remotes;
  remotes.addresses = {address};
  remotes.client.run_id = kRun;
  remotes.client.run_key = key;
  remotes.client.deadline = absl::Seconds(60);
  return remotes;
}

// Trained on a learner of its own, blue's weights and figures are those
// of blue trained beside red in one learner, update for update: the same
// seed, rows and steps.
TEST(PolicyLearnerTest, ALearnerOfItsOwnTrainsAsTheRunsLearnerWould) {
  const std::string dir = MakeTestDir();
  std::unique_ptr<BlueLearner> blue = StartBlue(dir);
  ASSERT_NE(blue, nullptr);
  ASSERT_OK_AND_ASSIGN(
      OtherPolicies here,
      OtherPolicies::Create(TwoPolicies(), torch::kCPU, nullptr, 3));
  ASSERT_OK_AND_ASSIGN(
      OtherPolicies there,
      OtherPolicies::Create(TwoPolicies(), torch::kCPU, nullptr, 3,
                            BlueAt(blue->address)));
  ASSERT_EQ(there.policies().size(), 1u);
  EXPECT_NE(there.policies()[0].remote, nullptr);
  ASSERT_TRUE(Equal(Weights(here.policies()[0].policy),
                    Weights(there.policies()[0].policy)));
  const std::vector<torch::Tensor> before = Weights(here.policies()[0].policy);
  for (int64_t update = 1; update <= 3; ++update) {
    const Rollout batch = Batch(update);
    const int64_t steps = (update - 1) * 32;
    ASSERT_OK(here.Update(batch, steps, update, Same));
    ASSERT_OK(there.Update(batch, steps, update, Same));
    EXPECT_TRUE(Equal(Weights(here.policies()[0].policy),
                      Weights(there.policies()[0].policy)))
        << "update " << update;
    const UpdateStats& a = here.policies()[0].last_update;
    const UpdateStats& b = there.policies()[0].last_update;
    EXPECT_EQ(a.policy_loss, b.policy_loss);
    EXPECT_EQ(a.value_loss, b.value_loss);
    EXPECT_EQ(a.approx_kl, b.approx_kl);
    EXPECT_EQ(a.epochs, b.epochs);
    EXPECT_EQ(a.learning_rate, b.learning_rate);
  }
  EXPECT_FALSE(Equal(before, Weights(there.policies()[0].policy)));
  EXPECT_EQ(blue->learner->updates(), 3);

  // Its checkpoints, where the run's learner would write them.
  ASSERT_OK(there.Write(dir, 3));
  const std::string ckpt3 =
      dir + "/policies/blue/checkpoints/ckpt-000000000003";
  EXPECT_TRUE(std::filesystem::exists(ckpt3));
  const std::vector<torch::Tensor> at3 = Weights(there.policies()[0].policy);
  ASSERT_OK(there.Update(Batch(4), 96, 4, Same));
  ASSERT_OK(there.Write(dir, 4));
  // The run kept checkpoint 3 only: blue's 4 goes.
  std::filesystem::create_directories(dir + "/checkpoints/ckpt-000000000003");
  ASSERT_OK(there.Prune(dir));
  EXPECT_TRUE(std::filesystem::exists(ckpt3));
  EXPECT_FALSE(std::filesystem::exists(
      dir + "/policies/blue/checkpoints/ckpt-000000000004"));
  // A resume from the run's checkpoint 3: the weights come back, and the
  // next update is 4 again.
  ASSERT_OK(there.Read(dir + "/checkpoints/ckpt-000000000003/"));
  EXPECT_TRUE(Equal(at3, Weights(there.policies()[0].policy)));
  EXPECT_EQ(blue->learner->updates(), 3);
  ASSERT_OK(there.Update(Batch(4), 96, 4, Same));
  ASSERT_OK(here.Update(Batch(4), 96, 4, Same));
  EXPECT_TRUE(Equal(Weights(here.policies()[0].policy),
                    Weights(there.policies()[0].policy)));
  // A run that starts from another run's checkpoint (PBT's start_from)
  // reads blue's beside that one.
  const std::string other = dir + "/started-from";
  std::filesystem::create_directories(other + "/policies/blue/checkpoints");
  std::filesystem::rename(
      ckpt3, other + "/policies/blue/checkpoints/ckpt-000000000003");
  ASSERT_OK(there.Read(other + "/checkpoints/ckpt-000000000003"));
  EXPECT_TRUE(Equal(at3, Weights(there.policies()[0].policy)));
  EXPECT_EQ(blue->learner->updates(), 3);
  blue->server.server->Shutdown();
}

TEST(PolicyLearnerTest, RefusalsNameWhatIsWrong) {
  const std::string dir = MakeTestDir();
  std::unique_ptr<BlueLearner> blue = StartBlue(dir);
  ASSERT_NE(blue, nullptr);
  const Rollout batch = Batch(1);
  const Rollout blue_rows =
      batch.Rows(torch::tensor(std::vector<int64_t>{1, 3, 5, 7}));

  // Only the run's own learner may call.
  PolicyLearnerClient stranger(Caller(blue->address, "blue", ""));
  EXPECT_THAT(
      stranger.Update(blue_rows, TwoPolicies().env(), 1, 0),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("x-rl-run-key")));
  PolicyLearnerClient client(Caller(blue->address, "red", kKey));
  // What says that the policy's learner is not where the run is ends the
  // run's learner retryably (ABORTED: its learners are placed again).
  EXPECT_THAT(client.Update(blue_rows, TwoPolicies().env(), 1, 0),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("trains policy \"blue\" of run duel-run, "
                                 "not policy \"red\"")));
  PolicyLearnerClient ok(Caller(blue->address, "blue", kKey));
  // Out of order: a batch is never learned from twice, nor one skipped.
  EXPECT_THAT(ok.Update(blue_rows, TwoPolicies().env(), 2, 0),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("update 2 does not follow its last, 0")));
  // Rows that are not blue's: 5 observation numbers.
  Rollout wide = blue_rows;
  wide.observations = torch::randn({4, 4, 5});
  EXPECT_THAT(ok.Update(wide, TwoPolicies().env(), 1, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rows")));
  EXPECT_EQ(blue->learner->updates(), 0);
  ASSERT_OK(ok.Update(blue_rows, TwoPolicies().env(), 1, 0).status());
  EXPECT_EQ(blue->learner->updates(), 1);
  EXPECT_THAT(ok.Checkpoint(CheckpointPolicyRequest::WRITE, 2),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("a checkpoint of update 2 asked for at "
                                 "update 1")));
  EXPECT_THAT(ok.Checkpoint(CheckpointPolicyRequest::READ, 7, {},
                            dir + "/checkpoints/ckpt-000000000007"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("policy blue's checkpoint beside")));

  // A learner for the run's first policy, or for one it lacks.
  PolicyLearnerOptions options;
  options.spec = TwoPolicies();
  options.run_id = kRun;
  options.policy = "red";
  EXPECT_THAT(PolicyLearner::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policy \"red\": not a policy of run "
                                 "duel-run after its first (blue)")));
  // As many learners of their own as policies after the first.
  OtherPolicies::Remotes two = BlueAt(blue->address);
  two.addresses.push_back(blue->address);
  EXPECT_THAT(
      OtherPolicies::Create(TwoPolicies(), torch::kCPU, nullptr, 3, two),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("2 learners of their own for the run's 1 policies")));
  // Before it has a policy to train.
  PolicyLearnerServiceImpl idle;
  ASSERT_OK_AND_ASSIGN(RunningServer idle_server,
                       StartServer({&idle}, ServerOptions()));
  PolicyLearnerClient early(
      Caller(absl::StrCat("127.0.0.1:", idle_server.port), "blue", kKey));
  // Waited for up to ready_timeout (1 s here), then ABORTED.
  EXPECT_THAT(
      early.Checkpoint(CheckpointPolicyRequest::WRITE, 0),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("trains no policy yet")));
  // A caller whose assignment is being replaced makes one attempt and
  // waits for no learner (a 30-minute ready_timeout would otherwise hold
  // it past the test's own timeout).
  PolicyLearnerClientOptions replaced =
      Caller(absl::StrCat("127.0.0.1:", idle_server.port), "blue", kKey);
  replaced.ready_timeout = absl::Minutes(30);
  replaced.cancelled = [] { return true; };
  EXPECT_THAT(
      PolicyLearnerClient(replaced).Checkpoint(CheckpointPolicyRequest::WRITE,
                                               0),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("trains no policy yet")));
  // One that comes up within it is waited for.
  PolicyLearnerClientOptions waits =
      Caller(absl::StrCat("127.0.0.1:", idle_server.port), "blue", kKey);
  waits.ready_timeout = absl::Seconds(60);
  PolicyLearnerClient patient(waits);
  std::thread arrives([&] {
    absl::SleepFor(absl::Milliseconds(200));
    idle.SetLearner(blue->learner, kKey);
  });
  const absl::StatusOr<CheckpointPolicyResponse> written =
      patient.Checkpoint(CheckpointPolicyRequest::WRITE, 1);
  arrives.join();
  EXPECT_OK(written.status());

  // A learner of a newer placement of the run's learners: a call of
  // another is waited for (UNAVAILABLE), then ABORTED.
  PolicyLearnerOptions placed = options;
  placed.policy = "blue";
  placed.run_dir = dir;
  placed.gang_id = "duel-run/7";
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<PolicyLearner> newer,
                       PolicyLearner::Create(placed));
  idle.SetLearner(newer, kKey, "duel-run/7");
  EXPECT_THAT(early.Checkpoint(CheckpointPolicyRequest::WRITE, 0),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("belongs to placement duel-run/7 of the "
                                 "run's learners, the call to placement "
                                 "(none)")));
  PolicyLearnerClientOptions same_placement =
      Caller(absl::StrCat("127.0.0.1:", idle_server.port), "blue", kKey);
  same_placement.gang_id = "duel-run/7";
  PolicyLearnerClient seven(same_placement);
  ASSERT_OK(seven.Checkpoint(CheckpointPolicyRequest::WRITE, 0).status());
  // Stopped: its placement's calls are ABORTED at once (not waited for);
  // another placement's still wait for a learner to come.
  idle.SetLearner(nullptr, "");
  EXPECT_THAT(seven.Checkpoint(CheckpointPolicyRequest::WRITE, 0),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("this learner stopped training policy blue "
                                 "of its run")));
  EXPECT_THAT(
      early.Checkpoint(CheckpointPolicyRequest::WRITE, 0),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("trains no policy yet")));
  idle_server.server->Shutdown();
  blue->server.server->Shutdown();
}

// TwoPolicies with blue's updates in 8 minibatches: blue's rows of one
// copy (4 steps) cannot make them.
RunSpec GangSpec() {
  RunSpec spec = TwoPolicies();
  spec.mutable_policies(1)->mutable_ppo()->set_num_minibatches(8);
  return spec;
}

// Blue's rows of `batch` (agent 1 of each copy), as rank `rank` of the
// run's gang would send them to blue's member `rank`.
UpdatePolicyRequest BlueUpdate(const Rollout& batch, int64_t update,
                               int64_t env_steps_before) {
  const RunSpec spec = TwoPolicies();
  UpdatePolicyRequest request;
  request.set_run_id(kRun);
  request.set_policy("blue");
  request.set_update(update);
  request.set_env_steps_before(env_steps_before);
  request.mutable_rows()->set_run_id(kRun);
  *request.mutable_rows()->mutable_env() = spec.env();
  const torch::Tensor rows = torch::tensor(
      RowsOfPolicy(spec, 1, batch.rewards.size(1)), torch::kInt64);
  EXPECT_OK(EncodeSegment(batch.Rows(rows), request.mutable_rows()));
  return request;
}

// The weights a policy's learner answered with.
std::vector<torch::Tensor> WeightsIn(const UpdatePolicyResponse& answer) {
  absl::StatusOr<OtherPolicies::Policy> copy =
      OtherPolicies::CreatePolicy(GangSpec(), 1, torch::kCPU, nullptr, 3);
  EXPECT_OK(copy.status());
  if (!copy.ok()) return {};
  EXPECT_OK(DecodePolicyTensors(answer.parameters().parameters(), "parameters",
                                copy->policy));
  return Weights(copy->policy);
}

// Two ranks at once, each on a thread: `body(rank, collective)` with a
// collective of gang `gang_id` (real gloo on loopback).
void InGang(const RendezvousServer& server, const std::string& gang_id,
            const std::function<void(int, std::shared_ptr<Collective>)>& body) {
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      CollectiveOptions c;
      c.rank = rank;
      c.world_size = 2;
      c.rendezvous_address = absl::StrCat("127.0.0.1:", server.port());
      c.gang_id = gang_id;
      absl::StatusOr<std::unique_ptr<Collective>> collective =
          ConnectCollective(c);
      EXPECT_OK(collective.status());
      if (collective.ok()) body(rank, std::move(*collective));
    });
  }
  for (std::thread& t : ranks) t.join();
}

// Blue on a gang of two of its own (num_learners 2): member r updates on
// rank r's rows, the members all-reduce, and blue's weights and figures
// are those of blue trained by the run's gang of two itself, update for
// update. Before their gang meets they take no update; only member 0
// touches the checkpoints; a checkpoint it reads (before the members meet,
// or after) reaches member 1 before the next update; an update one member
// refuses (its number, its rows), both refuse.
TEST(PolicyLearnerTest, AGangOfItsOwnTrainsAsTheRunsGangWould) {
  const std::string dir = MakeTestDir();
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  constexpr int kUpdates = 3;
  // Made here, before the threads: Batch seeds torch's global generator.
  std::vector<std::vector<Rollout>> batches(kUpdates + 3);
  for (int64_t u = 1; u < kUpdates + 3; ++u) {
    for (int rank = 0; rank < 2; ++rank) {
      batches[u].push_back(Batch(static_cast<uint64_t>(u * 10 + rank)));
    }
  }
  auto batch = [&](int64_t update, int rank) { return batches[update][rank]; };
  // The reference: the run's gang of two trains blue beside red.
  std::vector<std::vector<std::vector<torch::Tensor>>> expected(
      2, std::vector<std::vector<torch::Tensor>>(kUpdates + 1));
  std::vector<std::vector<double>> expected_loss(2,
                                                 std::vector<double>(kUpdates));
  InGang(*server, "duel-run/1",
         [&](int rank, std::shared_ptr<Collective> gang) {
           absl::StatusOr<OtherPolicies> here =
               OtherPolicies::Create(GangSpec(), torch::kCPU, gang.get(), 3);
           ASSERT_OK(here.status());
           for (int64_t u = 1; u <= kUpdates + 1; ++u) {
             ASSERT_OK(here->Update(batch(u, rank), (u - 1) * 64, u, Same));
             expected[rank][u - 1] = Weights(here->policies()[0].policy);
             if (u <= kUpdates) {
               expected_loss[rank][u - 1] =
                   here->policies()[0].last_update.policy_loss;
             }
           }
         });
  ASSERT_TRUE(Equal(expected[0][kUpdates - 1], expected[1][kUpdates - 1]));

  // Blue's members of a placement, each given its collective by
  // `join(rank)` (in the placement's gang).
  std::vector<std::shared_ptr<PolicyLearner>> members(2);
  auto place = [&] {
    for (int rank = 0; rank < 2; ++rank) {
      PolicyLearnerOptions options;
      options.spec = GangSpec();
      options.run_id = kRun;
      options.policy = "blue";
      options.run_dir = dir;
      options.member = rank;
      options.gang_size = 2;
      absl::StatusOr<std::unique_ptr<PolicyLearner>> made =
          PolicyLearner::Create(options);
      EXPECT_OK(made.status());
      members[rank] = made.ok() ? *std::move(made) : nullptr;
    }
  };
  auto join = [&](const std::string& gang_id) {
    InGang(*server, gang_id, [&](int rank, std::shared_ptr<Collective> gang) {
      ASSERT_OK(members[rank]->JoinGang(gang));
      EXPECT_THAT(members[rank]->JoinGang(gang),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr("after joining its gang")));
    });
  };
  place();
  ASSERT_NE(members[0], nullptr);
  ASSERT_NE(members[1], nullptr);
  // Before its gang: no update (the caller retries).
  EXPECT_THAT(members[1]->Update(BlueUpdate(batch(1, 1), 1, 0)),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("member 1 of policy blue's gang is still "
                                 "meeting the other 1")));
  join("duel-run/1/policy/blue");
  // Each member's call on a thread of its own (they meet in all-reduces).
  std::vector<absl::StatusOr<UpdatePolicyResponse>> answers(2);
  auto update_each = [&](const std::vector<UpdatePolicyRequest>& requests) {
    std::vector<std::thread> calls;
    for (int rank = 0; rank < 2; ++rank) {
      calls.emplace_back(
          [&, rank] { answers[rank] = members[rank]->Update(requests[rank]); });
    }
    for (std::thread& t : calls) t.join();
  };
  auto update = [&](std::vector<int64_t> numbers, int64_t batch_update) {
    update_each({BlueUpdate(batch(batch_update, 0), numbers[0],
                            (batch_update - 1) * 64),
                 BlueUpdate(batch(batch_update, 1), numbers[1],
                            (batch_update - 1) * 64)});
  };
  // Update 4 on both, from checkpoint 3: the reference's weights.
  auto expect_update_4_from_3 = [&] {
    update({kUpdates + 1, kUpdates + 1}, kUpdates + 1);
    for (int rank = 0; rank < 2; ++rank) {
      ASSERT_OK(answers[rank].status()) << "member " << rank;
      EXPECT_EQ(members[rank]->updates(), kUpdates + 1);
      EXPECT_TRUE(Equal(expected[0][kUpdates], WeightsIn(*answers[rank])))
          << "member " << rank;
    }
  };
  for (int64_t u = 1; u <= kUpdates; ++u) {
    update({u, u}, u);
    for (int rank = 0; rank < 2; ++rank) {
      ASSERT_OK(answers[rank].status())
          << "member " << rank << ", update " << u;
      EXPECT_EQ(answers[rank]->figures().policy_loss(),
                expected_loss[rank][u - 1])
          << "member " << rank << ", update " << u;
      EXPECT_EQ(members[rank]->updates(), u);
    }
  }
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(Equal(expected[0][kUpdates - 1], WeightsIn(*answers[rank])))
        << "member " << rank;
  }

  // Member 0 writes blue's checkpoint; member 1 refuses to.
  CheckpointPolicyRequest write;
  write.set_run_id(kRun);
  write.set_policy("blue");
  write.set_action(CheckpointPolicyRequest::WRITE);
  write.set_updates(kUpdates);
  ASSERT_OK(members[0]->Checkpoint(write).status());
  EXPECT_THAT(members[1]->Checkpoint(write),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("policy blue: member 1 of its gang; member 0 "
                                 "writes, reads and prunes its checkpoints")));
  update({kUpdates + 1, kUpdates + 1}, kUpdates + 1);
  ASSERT_OK(answers[0].status());
  ASSERT_OK(answers[1].status());
  EXPECT_TRUE(Equal(expected[0][kUpdates], WeightsIn(*answers[1])));
  // A resume: member 0 reads checkpoint 3 back; member 1, at update 4,
  // takes member 0's state with the next update, which is 4 again on both.
  std::filesystem::create_directories(dir + "/checkpoints/ckpt-000000000003");
  CheckpointPolicyRequest read = write;
  read.set_action(CheckpointPolicyRequest::READ);
  read.set_run_checkpoint(dir + "/checkpoints/ckpt-000000000003");
  ASSERT_OK(members[0]->Checkpoint(read).status());
  EXPECT_EQ(members[0]->updates(), kUpdates);
  EXPECT_EQ(members[1]->updates(), kUpdates + 1);
  expect_update_4_from_3();
  // Numbers that differ: the member whose update does not follow refuses,
  // and so does the other.
  update({kUpdates + 2, kUpdates + 3}, kUpdates + 2);
  EXPECT_THAT(answers[0].status(),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("update 5 was refused by another member of "
                                 "its gang")));
  EXPECT_THAT(answers[1].status(),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("update 6 does not follow its last, 4")));
  // Rows that one member refuses (values that are not finite): both
  // refuse.
  Rollout bad = batch(kUpdates + 2, 1);
  bad.values = torch::full_like(bad.values, std::nanf(""));
  update_each({BlueUpdate(batch(kUpdates + 2, 0), kUpdates + 2, 0),
               BlueUpdate(bad, kUpdates + 2, 0)});
  EXPECT_THAT(answers[0].status(),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("update 5 was refused by another member of "
                                 "its gang")));
  EXPECT_THAT(
      answers[1].status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("rows: segment.values: values must be finite")));
  // Rows of one copy, which cannot make blue's 8 minibatches (the update's
  // own check, made before the members agree): both refuse.
  update_each({BlueUpdate(batch(kUpdates + 2, 0), kUpdates + 2, 0),
               BlueUpdate(Batch(kUpdates + 2, /*rows=*/2), kUpdates + 2, 0)});
  EXPECT_THAT(answers[0].status(),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("update 5 was refused by another member of "
                                 "its gang")));
  EXPECT_THAT(answers[1].status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policy blue: update 5: rollout: 4 x 1 steps "
                                 "cannot make ppo.num_minibatches (8)")));
  EXPECT_EQ(members[0]->updates(), kUpdates + 1);
  EXPECT_EQ(members[1]->updates(), kUpdates + 1);

  // A new placement resumes from checkpoint 3: member 0 reads it before
  // the members meet (as the run's learner reads it at its start), and
  // both make update 4 from it.
  place();
  ASSERT_NE(members[0], nullptr);
  ASSERT_NE(members[1], nullptr);
  ASSERT_OK(members[0]->Checkpoint(read).status());
  EXPECT_EQ(members[0]->updates(), kUpdates);
  EXPECT_EQ(members[1]->updates(), 0);
  join("duel-run/2/policy/blue");
  expect_update_4_from_3();
}

// A member of blue's gang placed by a learner worker (LearnerWorkload):
// while it waits for the other member, it serves the run's checkpoint
// calls (a resume reads member 0's then) and refuses updates until the
// gang meets; a newer assignment (Cancel) ends the wait, and the member
// is then stopped (its placement's calls are ABORTED).
TEST(PolicyLearnerTest, AMemberServesCheckpointsWhileItsGangMeets) {
  const std::string dir = MakeTestDir();
  ASSERT_OK_AND_ASSIGN(auto rendezvous, RendezvousServer::Start(0));
  RunSpec spec = TwoPolicies();
  spec.mutable_resources()->set_num_learners(2);
  spec.mutable_resources()->set_learner_per_policy(true);
  // A checkpoint of blue to read: update 0's, beside the run's 0.
  {
    PolicyLearnerOptions alone;
    alone.spec = spec;
    alone.run_id = kRun;
    alone.policy = "blue";
    alone.run_dir = dir;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<PolicyLearner> writer,
                         PolicyLearner::Create(alone));
    CheckpointPolicyRequest write;
    write.set_run_id(kRun);
    write.set_policy("blue");
    write.set_action(CheckpointPolicyRequest::WRITE);
    ASSERT_OK(writer->Checkpoint(write).status());
    std::filesystem::create_directories(dir + "/checkpoints/ckpt-000000000000");
  }
  LearnerServiceImpl learner_service;
  PolicyLearnerServiceImpl policy_service;
  LearnerWorkload workload(&learner_service, nullptr, nullptr, "127.0.0.1",
                           absl::Seconds(60), nullptr, &policy_service);
  ASSERT_OK_AND_ASSIGN(RunningServer server,
                       StartServer({&policy_service}, ServerOptions()));
  Assignment assignment;
  assignment.set_run_id(kRun);
  *assignment.mutable_spec() = spec;
  assignment.set_rank(2);  // blue's member 0 (ranks 0-1: red's gang)
  assignment.set_world_size(2);
  assignment.set_gang_id("duel-run/1");
  assignment.set_rendezvous_address(
      absl::StrCat("127.0.0.1:", rendezvous->port()));
  assignment.set_checkpoint_dir(dir);
  assignment.set_run_key(kKey);
  absl::Status started;
  std::thread start([&] { started = workload.Start(assignment); });

  PolicyLearnerClientOptions caller =
      Caller(absl::StrCat("127.0.0.1:", server.port), "blue", kKey);
  caller.gang_id = "duel-run/1";
  caller.ready_timeout = absl::Seconds(60);
  PolicyLearnerClient run_learner(caller);
  // Served while member 1 is still missing.
  EXPECT_OK(run_learner
                .Checkpoint(CheckpointPolicyRequest::READ, 0, {},
                            dir + "/checkpoints/ckpt-000000000000")
                .status());
  PolicyLearnerClientOptions brief = caller;
  brief.ready_timeout = absl::Milliseconds(300);
  PolicyLearnerClient impatient(brief);
  EXPECT_THAT(impatient.Update(Batch(1), spec.env(), 1, 0),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("member 0 of policy blue's gang is still "
                                 "meeting the other 1")));
  // A newer assignment arrives: the wait ends, and the member stops.
  workload.Cancel();
  start.join();
  EXPECT_THAT(started, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(run_learner.Checkpoint(CheckpointPolicyRequest::WRITE, 0),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("this learner stopped training policy blue "
                                 "of its run")));
  server.server->Shutdown();
}

// A learner that stops waits for the update in flight to end (the service
// counts the calls), and then answers its placement's calls with ABORTED
// at once. The run's learner stopping (StopWaiting) cancels its own call
// in flight: it returns ABORTED while the update is still held there.
TEST(PolicyLearnerTest, AStopWaitsForTheCallInFlightAndACallerStopCancels) {
  const std::string dir = MakeTestDir();
  // Updates 1 and 2 are each held where they start until the test lets
  // them go.
  absl::Notification started[2], go[2];
  std::atomic<int> starts{0};
  PolicyLearnerOptions options;
  options.spec = TwoPolicies();
  options.run_id = kRun;
  options.policy = "blue";
  options.run_dir = dir;
  options.gang_id = "duel-run/3";
  options.update_started = [&] {
    const int k = starts.fetch_add(1);
    if (k < 2) {
      started[k].Notify();
      go[k].WaitForNotification();
    }
  };
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<PolicyLearner> learner,
                       PolicyLearner::Create(options));
  PolicyLearnerServiceImpl service;
  service.SetLearner(learner, kKey, "duel-run/3");
  ASSERT_OK_AND_ASSIGN(RunningServer server,
                       StartServer({&service}, ServerOptions()));
  PolicyLearnerClientOptions placed =
      Caller(absl::StrCat("127.0.0.1:", server.port), "blue", kKey);
  placed.gang_id = "duel-run/3";
  const EnvSpec env = TwoPolicies().env();

  // The stop waits for update 1, which then answers.
  PolicyLearnerClient first(placed);
  absl::StatusOr<UpdatePolicyResponse> one;
  std::thread call([&] { one = first.Update(Batch(1, 4), env, 1, 0); });
  // (EXPECT, not ASSERT: the threads are joined below either way.)
  EXPECT_TRUE(started[0].WaitForNotificationWithTimeout(absl::Seconds(60)));
  absl::Notification stopped;
  std::thread stop([&] {
    service.SetLearner(nullptr, "");
    stopped.Notify();
  });
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(300)))
      << "the stop did not wait for the update in flight";
  go[0].Notify();
  call.join();
  stop.join();
  EXPECT_TRUE(stopped.HasBeenNotified());
  EXPECT_OK(one.status());
  EXPECT_EQ(learner->updates(), 1);
  EXPECT_THAT(first.Update(Batch(2, 4), env, 2, 16),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("this learner stopped training policy blue "
                                 "of its run")));

  // Taken up again: the run's learner stops while update 2 is held there.
  service.SetLearner(learner, kKey, "duel-run/3");
  // A deadline past the test's own: only the cancel can end this call
  // while the update is held.
  PolicyLearnerClientOptions long_deadline = placed;
  long_deadline.deadline = absl::Minutes(30);
  PolicyLearnerClient second(long_deadline);
  absl::StatusOr<UpdatePolicyResponse> two;
  std::thread cancelled([&] { two = second.Update(Batch(2, 4), env, 2, 16); });
  EXPECT_TRUE(started[1].WaitForNotificationWithTimeout(absl::Seconds(60)));
  second.StopWaiting();
  cancelled.join();  // while update 2 is still held
  EXPECT_THAT(two.status(),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("update 2: CANCELLED (the run's learner is "
                                 "stopping)")));
  // The learner finishes the update its caller left (it does not stop it).
  go[1].Notify();
  service.SetLearner(nullptr, "");
  EXPECT_EQ(learner->updates(), 2);
  server.server->Shutdown();
}

}  // namespace
}  // namespace rl
