// The learner and actors as real processes on loopback: learning in sync and
// async mode, an actor killed, the learner killed and restarted, a
// malformed segment from a rogue client, and a recurrent policy.
#include <signal.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/learner.grpc.pb.h"
#include "testing/process_fixture.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

constexpr char kLearner[] = "learner/learner_main";
constexpr char kActor[] = "actor/actor_main";

// CartPole with two actors; the learner stops once the mean return of the
// last 100 episodes reaches 475.
std::string CartPoleRun(const std::string& mode) {
  return absl::StrCat(R"(name: cartpole
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: 300000
seed: 1
target_return: 475
ppo:
  learning_rate: 1.0e-3
  gamma: 0.98
  gae_lambda: 0.8
  num_epochs: 20
  num_minibatches: 1
  clip_value_loss: false
  entropy_coef: 0.0
resources: {num_actors: 2}
checkpoint_interval: 5
)",
                      mode);
}

struct Result {
  bool done = false;
  double mean_return = 0;
  int64_t env_steps = 0;
  int64_t rejected = 0;
};

class DistributedTest : public ProcessTest {
 protected:
  std::string WriteRunFile(const std::string& yaml) {
    const std::string path = Path("run.yaml");
    std::ofstream(path) << yaml;
    return path;
  }

  // Starts a learner and returns its port (0, and a failure, if none).
  int StartLearner(const std::string& run_file, int port = 0) {
    const std::string port_file = Path(absl::StrCat("port.", ++learners_));
    learner_ = Start(kLearner,
                     {"--run=" + run_file, absl::StrCat("--port=", port),
                      "--port_file=" + port_file, "--run_dir=" + Path("run"),
                      "--result_file=" + Path("result.json")},
                     absl::StrCat("learner.", learners_, ".log"));
    return WaitForPort(*learner_, port_file);
  }

  void StartActor(const std::string& run_file, int port, int id,
                  const std::vector<std::string>& flags = {}) {
    std::vector<std::string> args = {
        absl::StrCat("--learner=127.0.0.1:", port), "--run=" + run_file,
        absl::StrCat("--actor_id=", id),
        "--metrics_port_file=" + Path(absl::StrCat("actor", id, ".metrics"))};
    args.insert(args.end(), flags.begin(), flags.end());
    actors_.push_back(Start(kActor, args, absl::StrCat("actor", id, ".log")));
  }

  // A learner and two actors on `yaml`; returns the learner's port.
  int StartRun(const std::string& yaml,
               const std::vector<std::string>& actor_flags = {}) {
    run_file_ = WriteRunFile(yaml);
    const int port = StartLearner(run_file_);
    if (port > 0) {
      StartActor(run_file_, port, 0, actor_flags);
      StartActor(run_file_, port, 1, actor_flags);
    }
    return port;
  }

  std::string LearnerLog() { return ReadTestFile(learner_->log_path()); }

  LearnerStatus Status(int port) {
    auto stub = LearnerService::NewStub(
        CreateChannel(absl::StrCat("127.0.0.1:", port)));
    auto context = ContextWithDeadline(absl::Seconds(5));
    LearnerStatus status;
    stub->GetStatus(context.get(), GetLearnerStatusRequest(), &status);
    return status;
  }

  bool WaitForSteps(int port, int64_t steps) {
    return WaitFor([&] { return Status(port).env_steps() >= steps; },
                   absl::Seconds(300), absl::Milliseconds(100));
  }

  // Waits for the learner to finish and reads its result file.
  Result Finish() {
    Result result;
    EXPECT_EQ(learner_->Wait(absl::Seconds(600)), std::optional<int>(0));
    // Written before the learner exits.
    std::ifstream in(Path("result.json"));
    const std::string text((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    EXPECT_FALSE(text.empty()) << "no " << Path("result.json");
    std::smatch m;
    result.done = text.find("\"done\": true") != std::string::npos;
    if (std::regex_search(text, m, std::regex("\"mean_return\": ([-0-9.]+)"))) {
      result.mean_return = std::stod(m[1]);
    }
    if (std::regex_search(text, m, std::regex("\"env_steps\": ([0-9]+)"))) {
      result.env_steps = std::stoll(m[1]);
    }
    if (std::regex_search(text, m,
                          std::regex("\"segments_rejected\": ([0-9]+)"))) {
      result.rejected = std::stoll(m[1]);
    }
    // Actors stop by themselves after the final policy.
    for (Subprocess* actor : actors_) {
      if (actor->running()) {
        EXPECT_EQ(actor->Wait(absl::Seconds(60)), std::optional<int>(0))
            << actor->log_path();
      }
    }
    return result;
  }

  std::string run_file_;
  int learners_ = 0;
  Subprocess* learner_ = nullptr;  // the latest; owned by the fixture
  std::vector<Subprocess*> actors_;
};

TEST_F(DistributedTest, SyncModeSolvesCartPole) {
  const int port = StartRun(CartPoleRun("sync_mode: SYNC\n"));
  ASSERT_GT(port, 0);
  // An actor's /metrics shows the actor (it once showed only the process).
  const std::optional<std::string> metrics_port =
      WaitForFile(Path("actor0.metrics"), absl::Seconds(60));
  ASSERT_TRUE(metrics_port.has_value());
  httplib::Client http("127.0.0.1", std::atoi(metrics_port->c_str()));
  std::string text;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto got = http.Get("/metrics");
        if (!got || got->status != 200) return false;
        text = got->body;
        const std::regex acked(
            R"re(actor_segments_acked_total\{run="[^"]+"\} ([0-9.e+]+))re");
        std::smatch m;
        return std::regex_search(text, m, acked) && std::stod(m[1]) > 0;
      },
      absl::Seconds(120), absl::Milliseconds(200)))
      << text;
  EXPECT_THAT(text, HasSubstr("actor_policy_version{run="));
  // Learner and actors share this host: segments go through shared memory.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto got = http.Get("/metrics");
        const std::regex shared(
            R"re(actor_segments_shared_total\{run="[^"]+"\} ([0-9.e+]+))re");
        std::smatch m;
        return got && got->status == 200 &&
               std::regex_search(got->body, m, shared) && std::stod(m[1]) > 0;
      },
      absl::Seconds(120), absl::Milliseconds(200)));
  const Result result = Finish();
  EXPECT_TRUE(result.done);
  EXPECT_GE(result.mean_return, 475);
  EXPECT_THAT(LearnerLog(), HasSubstr("segments through shared memory"));
  EXPECT_THAT(ReadTestFile(actors_[0]->log_path()),
              HasSubstr("segments go through shared memory"));
}

// Actors told not to offer shared memory (--shared_memory=false) send their
// segments' bytes on the stream.
TEST_F(DistributedTest, AsyncModeSolvesCartPole) {
  const int port =
      StartRun(CartPoleRun("sync_mode: ASYNC\nmax_policy_lag: 2\n"),
               {"--shared_memory=false"});
  ASSERT_GT(port, 0);
  const Result result = Finish();
  EXPECT_TRUE(result.done);
  EXPECT_GE(result.mean_return, 475);
  EXPECT_THAT(LearnerLog(),
              HasSubstr("segments as gRPC bytes (no shared memory offered)"));
  EXPECT_THAT(LearnerLog(),
              ::testing::Not(HasSubstr("segments through shared memory")));
}

TEST_F(DistributedTest, KilledActorDoesNotStopTheRun) {
  const int port = StartRun(CartPoleRun("sync_mode: SYNC\n"));
  ASSERT_GT(port, 0);
  ASSERT_TRUE(WaitForSteps(port, 10000));
  EXPECT_EQ(Stop(*actors_[1], SIGKILL), std::optional<int>(128 + SIGKILL));
  const int64_t at_kill = Status(port).env_steps();
  const Result result = Finish();
  EXPECT_TRUE(result.done);
  EXPECT_GT(result.env_steps, at_kill);
  EXPECT_GE(result.mean_return, 475);
}

TEST_F(DistributedTest, RestartedLearnerResumesAndActorsReconnect) {
  const int port = StartRun(CartPoleRun("sync_mode: SYNC\n"));
  ASSERT_GT(port, 0);
  ASSERT_TRUE(WaitForSteps(port, 20000));
  Stop(*learner_, SIGKILL);
  // Same port, same run directory: resumes from the newest checkpoint.
  ASSERT_EQ(StartLearner(run_file_, port), port);
  const LearnerStatus resumed = Status(port);
  EXPECT_GE(resumed.env_steps(), 10000);  // not from scratch
  const Result result = Finish();
  EXPECT_TRUE(result.done);
  EXPECT_GE(result.mean_return, 475);
}

TEST_F(DistributedTest, MalformedSegmentIsRejectedWhileActorsTrain) {
  const int port = StartRun(CartPoleRun("sync_mode: SYNC\n"));
  ASSERT_GT(port, 0);
  ASSERT_TRUE(WaitForSteps(port, 5000));

  auto stub =
      LearnerService::NewStub(CreateChannel(absl::StrCat("127.0.0.1:", port)));
  grpc::ClientContext context;
  auto stream = stub->StreamRollouts(&context);
  RolloutSegment bad;
  bad.set_run_id("cartpole");
  bad.set_actor_id(7);
  bad.set_sequence_number(1);
  bad.set_policy_version(1);
  bad.mutable_env()->set_id("CartPole-v1");
  bad.mutable_env()->set_observation_size(4);
  bad.mutable_env()->set_num_discrete_actions(2);
  bad.mutable_observations()->set_dtype(DTYPE_FLOAT32);
  bad.mutable_observations()->add_shape(3);  // but no bytes
  stream->Write(bad);
  stream->WritesDone();
  RolloutAck ack;
  while (stream->Read(&ack)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("segment.observations"));

  const Result result = Finish();
  EXPECT_TRUE(result.done);
  EXPECT_EQ(result.rejected, 1);
  EXPECT_GE(result.mean_return, 475);
}

// Recurrent PPO across processes: each actor carries its envs' LSTM states
// and ships them with every segment (segment.initial_state), the learner
// takes them into minibatches of whole env sequences, in async mode (policy
// lag 2, so segments of older policies and states are learned from too).
TEST_F(DistributedTest, RecurrentPolicyLearnsAcrossProcesses) {
  const int port = StartRun(R"(name: cartpole-lstm
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: 300000
seed: 1
target_return: 300
policy: {core: lstm, core_size: 32, hidden_sizes: [64]}
ppo: {learning_rate: 2.0e-3, gamma: 0.98, gae_lambda: 0.8, num_epochs: 10,
      num_minibatches: 2, entropy_coef: 0.0}
resources: {num_actors: 2}
sync_mode: ASYNC
max_policy_lag: 2
)");
  ASSERT_GT(port, 0);
  const Result result = Finish();
  EXPECT_TRUE(result.done);
  EXPECT_GE(result.mean_return, 300);
  EXPECT_EQ(result.rejected, 0);
}

}  // namespace
}  // namespace rl
