// Cost of distribution: env steps/s of one learner + one actor (two
// processes, gRPC on loopback, ASYNC mode) next to the local trainer (one
// process) with the same run file, in one run.
//
//   bazel run --config=opt //bench:distributed_bench --
//       --run=$PWD/examples/cartpole_throughput.yaml
//
// Steps/s are taken over the steady part of each run (from the first
// completed update to the last), so process start-up is not counted.
#include <torch/types.h>
#include <torch/utils.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"
#include "proto/learner.grpc.pb.h"
#include "runspec/run_spec.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, run, "examples/cartpole_throughput.yaml", "run file");
ABSL_FLAG(int64_t, steps, 2000000, "environment steps per measurement");
ABSL_FLAG(int, max_policy_lag, 1, "ASYNC mode's lag bound");
ABSL_FLAG(int, learner_torch_threads, 2,
          "LibTorch threads of the learner process (the actor uses 1)");

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

double LocalStepsPerSecond(const RunSpec& spec) {
  torch::set_num_threads(2);
  auto trainer = LocalTrainer::Create(spec, TrainerOptions{});
  if (!trainer.ok()) std::abort();
  if (!(*trainer)->Train(nullptr, 1).ok()) std::abort();  // warm-up update
  const int64_t steps0 = (*trainer)->progress().env_steps;
  const auto start = Clock::now();
  if (!(*trainer)->Train().ok()) std::abort();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  return ((*trainer)->progress().env_steps - steps0) / seconds;
}

double DistributedStepsPerSecond(const RunSpec& spec, const std::string& dir) {
  std::string json;
  google::protobuf::util::MessageToJsonString(spec, &json);
  const std::string run_file = dir + "/run.json";
  std::ofstream(run_file) << json;
  const std::string port_file = dir + "/port";
  rl::Subprocess learner(
      {"learner/learner_main", "--run=" + run_file, "--port_file=" + port_file,
       absl::StrCat("--torch_threads=",
                    absl::GetFlag(FLAGS_learner_torch_threads))},
      dir + "/learner.log");
  auto port = rl::WaitForFile(port_file, absl::Seconds(60));
  if (!port) std::abort();
  const std::string address =
      absl::StrCat("127.0.0.1:", std::atoi(port->c_str()));
  rl::Subprocess actor(
      {"actor/actor_main", "--learner=" + address, "--run=" + run_file},
      dir + "/actor.log");
  auto stub = LearnerService::NewStub(CreateChannel(address));
  int64_t first_steps = -1, last_steps = 0;
  Clock::time_point first_time, last_time;
  while (learner.running()) {
    LearnerStatus status;
    auto context = ContextWithDeadline(absl::Seconds(2));
    if (stub->GetStatus(context.get(), GetLearnerStatusRequest(), &status)
            .ok()) {
      if (status.updates() >= 1 && first_steps < 0) {
        first_steps = status.env_steps();
        first_time = Clock::now();
      }
      if (first_steps >= 0 && status.env_steps() > last_steps) {
        last_steps = status.env_steps();
        last_time = Clock::now();
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  actor.Wait(absl::Seconds(30));
  return (last_steps - first_steps) /
         std::chrono::duration<double>(last_time - first_time).count();
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto spec = rl::LoadRunSpecFile(absl::GetFlag(FLAGS_run));
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  spec->set_total_env_steps(absl::GetFlag(FLAGS_steps));
  spec->clear_target_return();
  spec->set_sync_mode(rl::ASYNC);
  spec->set_max_policy_lag(absl::GetFlag(FLAGS_max_policy_lag));
  spec->mutable_resources()->set_num_actors(1);
  spec->mutable_resources()->set_min_actors(1);
  const std::string dir =
      (std::filesystem::temp_directory_path() / "rl_distributed_bench")
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  const double local = rl::LocalStepsPerSecond(*spec);
  const double distributed = rl::DistributedStepsPerSecond(*spec, dir);
  std::printf("run file: %s (%d envs x %d steps, ASYNC, max_policy_lag %d)\n",
              absl::GetFlag(FLAGS_run).c_str(), spec->envs_per_actor(),
              spec->segment_length(), spec->max_policy_lag());
  std::printf("%-44s %14s\n", "setup", "env steps/s");
  std::printf("%-44s %14.0f\n", "local trainer (1 process, torch 2 threads)",
              local);
  std::printf(
      "%-44s %14.0f\n",
      absl::StrCat("learner + 1 actor (2 processes, gRPC, learner torch ",
                   absl::GetFlag(FLAGS_learner_torch_threads), ")")
          .c_str(),
      distributed);
  std::printf("distributed / local: %.0f%% (goal >= 90%%)\n",
              100 * distributed / local);
  return 0;
}
