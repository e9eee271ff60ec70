// Data-parallel learner scaling on this machine: L learner ranks (threads of
// one process, LibTorch at 1 intra-op thread, a real gloo process group on
// loopback), each updating from its own rollout of the same per-learner size,
// against one learner alone. Two per-learner sizes by default: the
// throughput configuration (examples/cartpole_throughput.yaml, 1024 envs x 32
// steps) and CleanRL's CartPole (4 x 128).
//
//   bazel run --config=opt //bench:learner_scaling_bench -- --max_learners=3
//
// Each gang runs twice: as the scheduler places it, and pinned (rank r on
// core r, as Slurm's --cpu-bind=cores or Kubernetes' static CPU manager give
// each learner cores of its own; while L <= cores).
//
// Prints, per size and L: updates/s of the gang, samples/s of all ranks
// together and its ratio to one learner (ideal: L, while L <= cores), the
// share of a rank's update time spent inside collective calls (waiting for
// the slowest rank included), collective calls per update and the median
// and p90 of one call. Then the floor: one gradient bucket's all-reduce
// among idle ranks.
#include <pthread.h>
#include <sched.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "learner/c10d_collective.h"
#include "learner/collective.h"
#include "learner/ppo_updater.h"
#include "runspec/run_spec.h"

ABSL_FLAG(int, max_learners, 3, "Largest gang measured.");
ABSL_FLAG(int, updates, 20, "Timed updates per rank (after 3 warm-up).");
ABSL_FLAG(std::vector<std::string>, shapes,
          (std::vector<std::string>{"1024x32", "4x128"}),
          "Per-learner rollouts, ENVSxSTEPS.");
ABSL_FLAG(int, minibatches, 4, "ppo.num_minibatches.");
ABSL_FLAG(int, epochs, 4, "ppo.num_epochs.");

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Forwards to a Collective and records the time of every call.
class TimedCollective : public Collective {
 public:
  explicit TimedCollective(std::unique_ptr<Collective> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduce(torch::Tensor& t, ReduceOp op) override {
    const auto start = Clock::now();
    absl::Status s = inner_->AllReduce(t, op);
    calls.push_back(Seconds(start));
    return s;
  }
  absl::Status Broadcast(torch::Tensor& t, int root) override {
    const auto start = Clock::now();
    absl::Status s = inner_->Broadcast(t, root);
    calls.push_back(Seconds(start));
    return s;
  }
  std::vector<double> calls;

 private:
  std::unique_ptr<Collective> inner_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

[[noreturn]] void Die(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  std::exit(1);
}

PPOConfig Ppo() {
  auto spec = LoadRunSpec(
      absl::StrCat("env: {id: CartPole-v1}\nppo: {num_epochs: ",
                   absl::GetFlag(FLAGS_epochs), ", num_minibatches: ",
                   absl::GetFlag(FLAGS_minibatches), "}"),
      RunFileFormat::kYaml);
  if (!spec.ok()) Die(spec.status());
  return spec->ppo();
}

ActorCritic Policy() {
  ActorCriticConfig config;
  config.observation_size = 4;
  config.num_actions = 2;
  config.hidden_sizes = {64, 64};
  torch::manual_seed(1);
  auto policy = CreateActorCritic(config);
  if (!policy.ok()) Die(policy.status());
  return *policy;
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

// Runs `body(rank, collective)` on `world` threads, each a rank of one gloo
// gang (no collective for a gang of one); `pin`: each on a core of its own.
void RunGang(int world, bool pin,
             const std::function<void(int, TimedCollective*)>& body) {
  std::unique_ptr<RendezvousServer> server;
  if (world > 1) {
    auto started = RendezvousServer::Start(0);
    if (!started.ok()) Die(started.status());
    server = *std::move(started);
  }
  static std::atomic<int> gang{0};
  const std::string gang_id = absl::StrCat("bench/", gang++);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      if (pin) {
        // Rank r on core r: gloo's threads, started by the rank, inherit it.
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(rank % std::thread::hardware_concurrency(), &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      }
      std::unique_ptr<TimedCollective> collective;
      if (world > 1) {
        CollectiveOptions options;
        options.rank = rank;
        options.world_size = world;
        options.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
        options.gang_id = gang_id;
        auto c = ConnectCollective(options);
        if (!c.ok()) Die(c.status());
        collective = std::make_unique<TimedCollective>(*std::move(c));
      }
      body(rank, collective.get());
    });
  }
  for (auto& t : threads) t.join();
}

struct Result {
  double seconds = 0;           // wall time of the timed updates (slowest)
  double collective_share = 0;  // mean over ranks
  double calls_per_update = 0;
  double p50 = 0, p90 = 0;  // one collective call, rank 0
};

Result Measure(int world, bool pin, int64_t T, int64_t E) {
  const int updates = absl::GetFlag(FLAGS_updates);
  std::vector<double> seconds(world), shares(world);
  Result result;
  RunGang(world, pin, [&](int rank, TimedCollective* collective) {
    ActorCritic policy = Policy();
    PpoUpdater updater(policy, Ppo(), 1 << 30, 1, ExecutionConfig());
    updater.set_collective(collective);
    const Rollout rollout = MakeRollout(policy, T, E, 10 + rank);
    for (int i = 0; i < 3; ++i) {
      if (auto u = updater.Update(rollout, 0); !u.ok()) Die(u.status());
    }
    if (collective) collective->calls.clear();
    const auto start = Clock::now();
    for (int i = 0; i < updates; ++i) {
      if (auto u = updater.Update(rollout, 0); !u.ok()) Die(u.status());
    }
    seconds[rank] = Seconds(start);
    if (collective == nullptr) return;
    double in_collectives = 0;
    for (double c : collective->calls) in_collectives += c;
    shares[rank] = in_collectives / seconds[rank];
    if (rank == 0) {
      result.calls_per_update =
          static_cast<double>(collective->calls.size()) / updates;
      result.p50 = Percentile(collective->calls, 0.5);
      result.p90 = Percentile(collective->calls, 0.9);
    }
  });
  for (int r = 0; r < world; ++r) {
    result.seconds = std::max(result.seconds, seconds[r]);
    result.collective_share += shares[r] / world;
  }
  return result;
}

// Median and p90 of one all-reduce of `floats` float32 values among `world`
// ranks that do nothing else.
std::pair<double, double> IdleAllReduce(int world, int64_t floats, int calls) {
  std::vector<double> rank0;
  RunGang(world, /*pin=*/false, [&](int rank, TimedCollective* c) {
    torch::Tensor t = torch::ones({floats}, torch::kFloat32);
    for (int i = 0; i < calls + 20; ++i) {
      if (auto s = c->AllReduce(t, ReduceOp::kSum); !s.ok()) Die(s);
    }
    if (rank == 0) rank0.assign(c->calls.begin() + 20, c->calls.end());
  });
  return {Percentile(rank0, 0.5), Percentile(rank0, 0.9)};
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  at::set_num_threads(1);
  const int updates = absl::GetFlag(FLAGS_updates);
  std::printf(
      "learner scaling: %d epochs x %d minibatches, 1 torch thread per "
      "learner, %u cores\n",
      absl::GetFlag(FLAGS_epochs), absl::GetFlag(FLAGS_minibatches),
      std::thread::hardware_concurrency());
  for (const std::string& shape : absl::GetFlag(FLAGS_shapes)) {
    const std::vector<std::string> parts = absl::StrSplit(shape, 'x');
    int64_t envs = 0, steps = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &envs) ||
        !absl::SimpleAtoi(parts[1], &steps) || envs < 1 || steps < 1) {
      std::fprintf(stderr, "--shapes: expected ENVSxSTEPS, got \"%s\"\n",
                   shape.c_str());
      return 2;
    }
    const double samples = static_cast<double>(envs * steps);
    std::printf("\nper learner %lld envs x %lld steps = %g samples/update\n",
                static_cast<long long>(envs), static_cast<long long>(steps),
                samples);
    std::printf("%-9s %10s %12s %8s %11s %11s %17s\n", "learners", "updates/s",
                "samples/s", "speedup", "coll. share", "calls/upd.",
                "call p50/p90 (us)");
    double base = 0;
    const unsigned cores = std::thread::hardware_concurrency();
    for (int world = 1; world <= absl::GetFlag(FLAGS_max_learners); ++world) {
      for (bool pin : {false, true}) {
        if (pin && (world == 1 || static_cast<unsigned>(world) > cores)) {
          continue;
        }
        const rl::Result r = rl::Measure(world, pin, steps, envs);
        const double ups = updates / r.seconds;
        const double sps = ups * samples * world;
        if (world == 1) base = sps;
        const std::string label = absl::StrCat(world, pin ? " pinned" : "");
        if (world == 1) {
          std::printf("%-9s %10.1f %12.0f %7.2fx %11s %11s %17s\n",
                      label.c_str(), ups, sps, 1.0, "-", "-", "-");
        } else {
          std::printf(
              "%-9s %10.1f %12.0f %7.2fx %10.1f%% %11.1f %8.0f/%-8.0f\n",
              label.c_str(), ups, sps, sps / base, 100 * r.collective_share,
              r.calls_per_update, 1e6 * r.p50, 1e6 * r.p90);
        }
      }
    }
  }
  int64_t bucket = 1;  // the gradients and the not-finite flag
  for (const auto& p : rl::Policy()->parameters()) bucket += p.numel();
  std::printf("\nidle all-reduce of one gradient bucket (%lld floats):\n",
              static_cast<long long>(bucket));
  for (int world = 2; world <= absl::GetFlag(FLAGS_max_learners); ++world) {
    const auto [p50, p90] = rl::IdleAllReduce(world, bucket, 1000);
    std::printf("  %d ranks: p50 %.0f us, p90 %.0f us\n", world, 1e6 * p50,
                1e6 * p90);
  }
  return 0;
}
