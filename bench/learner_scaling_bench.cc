// Data-parallel learner scaling on this machine: L learner ranks (threads of
// one process, LibTorch at 1 intra-op thread, a real gloo process group on
// loopback), each updating from its own rollout of the same per-learner size
// (CleanRL's CartPole shapes by default), against one learner alone.
//
//   bazel run --config=opt //bench:learner_scaling_bench -- --max_learners=3
//
// Prints, per L: updates/s of the gang, samples/s of all ranks together and
// its ratio to one learner (ideal: L, while L <= cores), and the share of a
// rank's update time spent inside collective calls (waiting included).
#include <torch/types.h>
#include <torch/utils.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "learner/c10d_collective.h"
#include "learner/collective.h"
#include "learner/ppo_updater.h"
#include "runspec/run_spec.h"

ABSL_FLAG(int, max_learners, 3, "Largest gang measured.");
ABSL_FLAG(int, updates, 30, "Timed updates per rank (after 3 warm-up).");
ABSL_FLAG(int, envs, 4, "Environments per learner's rollout.");
ABSL_FLAG(int, steps, 128, "Steps per learner's rollout.");
ABSL_FLAG(int, minibatches, 4, "ppo.num_minibatches.");
ABSL_FLAG(int, epochs, 4, "ppo.num_epochs.");

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

// Forwards to a Collective and adds up the time spent in it.
class TimedCollective : public Collective {
 public:
  explicit TimedCollective(std::unique_ptr<Collective> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduce(torch::Tensor& t, ReduceOp op) override {
    const auto start = Clock::now();
    absl::Status s = inner_->AllReduce(t, op);
    seconds += std::chrono::duration<double>(Clock::now() - start).count();
    return s;
  }
  absl::Status Broadcast(torch::Tensor& t, int root) override {
    const auto start = Clock::now();
    absl::Status s = inner_->Broadcast(t, root);
    seconds += std::chrono::duration<double>(Clock::now() - start).count();
    return s;
  }
  double seconds = 0;

 private:
  std::unique_ptr<Collective> inner_;
};

PPOConfig Ppo() {
  auto spec = LoadRunSpec(
      absl::StrCat("env: {id: CartPole-v1}\nppo: {num_epochs: ",
                   absl::GetFlag(FLAGS_epochs), ", num_minibatches: ",
                   absl::GetFlag(FLAGS_minibatches), "}"),
      RunFileFormat::kYaml);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    std::exit(2);
  }
  return spec->ppo();
}

Rollout MakeRollout(ActorCritic& policy, int64_t T, int64_t E, int seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Rollout r = Rollout::Allocate(T, E, 4, 0);
  torch::NoGradGuard no_grad;
  r.observations.copy_(torch::randn({T, E, 4}, gen));
  r.actions.copy_(torch::randint(0, 2, {T, E}, gen));
  const PolicyEvaluation eval = policy->Evaluate(
      r.observations.reshape({-1, 4}), r.actions.reshape({-1}));
  r.log_probs.copy_(eval.log_probs.reshape({T, E}));
  r.values.copy_(eval.values.reshape({T, E}));
  r.rewards.fill_(1);
  r.terminated.copy_((torch::rand({T, E}, gen) < 0.02).to(torch::kUInt8));
  r.truncated.zero_();
  r.truncated_values.zero_();
  r.next_values.zero_();
  return r;
}

struct Result {
  double seconds = 0;           // wall time of the timed updates
  double collective_share = 0;  // mean over ranks
};

Result Measure(int world) {
  const int64_t T = absl::GetFlag(FLAGS_steps), E = absl::GetFlag(FLAGS_envs);
  const int updates = absl::GetFlag(FLAGS_updates);
  ActorCriticConfig config;
  config.observation_size = 4;
  config.num_actions = 2;
  config.hidden_sizes = {64, 64};
  std::vector<ActorCritic> policies;
  for (int r = 0; r < world; ++r) {
    torch::manual_seed(1);
    policies.push_back(*CreateActorCritic(config));
  }
  std::unique_ptr<RendezvousServer> server;
  if (world > 1) server = *RendezvousServer::Start(0);
  static std::atomic<int> gang{0};
  const std::string gang_id = absl::StrCat("bench/", gang++);
  std::vector<double> seconds(world), shares(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<TimedCollective> collective;
      if (world > 1) {
        CollectiveOptions options;
        options.rank = rank;
        options.world_size = world;
        options.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
        options.gang_id = gang_id;
        auto c = ConnectCollective(options);
        if (!c.ok()) {
          std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
          std::exit(1);
        }
        collective = std::make_unique<TimedCollective>(*std::move(c));
      }
      PpoUpdater updater(policies[rank], Ppo(), 1 << 30, 1);
      updater.set_collective(collective.get());
      const Rollout rollout = MakeRollout(policies[rank], T, E, 10 + rank);
      for (int i = 0; i < 3; ++i) (void)updater.Update(rollout, 0);
      if (collective) collective->seconds = 0;
      const auto start = Clock::now();
      for (int i = 0; i < updates; ++i) {
        const auto result = updater.Update(rollout, 0);
        if (!result.ok()) {
          std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
          std::exit(1);
        }
      }
      seconds[rank] =
          std::chrono::duration<double>(Clock::now() - start).count();
      shares[rank] = collective ? collective->seconds / seconds[rank] : 0;
    });
  }
  for (auto& t : threads) t.join();
  Result result;
  for (int r = 0; r < world; ++r) {
    result.seconds = std::max(result.seconds, seconds[r]);
    result.collective_share += shares[r] / world;
  }
  return result;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  at::set_num_threads(1);
  const int updates = absl::GetFlag(FLAGS_updates);
  const double samples = static_cast<double>(absl::GetFlag(FLAGS_envs)) *
                         absl::GetFlag(FLAGS_steps);
  std::printf(
      "learner scaling: per learner %g samples/update, %d epochs x %d "
      "minibatches, %u cores\n",
      samples, absl::GetFlag(FLAGS_epochs), absl::GetFlag(FLAGS_minibatches),
      std::thread::hardware_concurrency());
  std::printf("%-9s %12s %14s %9s %16s\n", "learners", "updates/s", "samples/s",
              "speedup", "collective share");
  double base = 0;
  for (int world = 1; world <= absl::GetFlag(FLAGS_max_learners); ++world) {
    const rl::Result r = rl::Measure(world);
    const double ups = updates / r.seconds;
    const double sps = ups * samples * world;
    if (world == 1) base = sps;
    std::printf("%-9d %12.1f %14.0f %8.2fx %15.1f%%\n", world, ups, sps,
                sps / base, 100 * r.collective_share);
  }
  return 0;
}
