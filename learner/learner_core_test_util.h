// Helpers of the learner core's tests (learner_core_test.cc,
// learner_core_intake_test.cc, learner_core_recovery_test.cc): the CUDA
// runtime loaded first, a small CartPole run's spec and segments, one
// stream's acks, waiting for a published version, and a gang's two ranks.
#ifndef RL_LEARNER_LEARNER_CORE_TEST_UTIL_H_
#define RL_LEARNER_LEARNER_CORE_TEST_UTIL_H_

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "learner/c10d_collective.h"
#include "learner/collective.h"
#include "learner/learner_core.h"
#include "learner/segment_intake.h"
#include "policy/cuda_runtime.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"
#include "proto/common.pb.h"
#include "proto/learner.pb.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/wait_for.h"

namespace rl {

// LibTorch caches its answer about CUDA at the first question (seeding asks
// it): load the CUDA runtime first, as the learner's main does.
class CudaRuntimeFirst : public ::testing::Environment {
 public:
  void SetUp() override { PrepareCudaRuntime(); }
};

// CartPole, 2 envs x 4 steps per segment, one minibatch and epoch per
// update, one actor unless `extra` says otherwise.
inline RunSpec Spec(const std::string& extra,
                    int64_t total_env_steps = 1000000) {
  return SmallRunSpec(absl::StrCat(
      "name: t\nenvs_per_actor: 2\nsegment_length: 4\ntotal_env_steps: ",
      total_env_steps, "\nppo: {num_minibatches: 1, num_epochs: 1}\n", extra));
}

// Rewards 1; the first step's value `first_value`. With `episode_lengths`
// (one per env), each env ends an episode of that many steps and that
// return (CartPole pays 1 a step) at the segment's last step.
inline std::unique_ptr<RolloutSegment> Segment(
    int actor, int64_t seq, int64_t version, float first_value = 0,
    const std::vector<int>& episode_lengths = {}) {
  Rollout r = Rollout::Allocate(4, 2, 4, 0);
  r.observations.uniform_(-0.05, 0.05);
  r.rewards.fill_(1);
  r.values[0][0] = first_value;
  for (size_t e = 0; e < episode_lengths.size(); ++e) {
    r.terminated[3][static_cast<int64_t>(e)] = 1;
  }
  auto s = std::make_unique<RolloutSegment>();
  EXPECT_OK(EncodeSegment(r, s.get()));
  s->set_run_id("t");
  s->set_actor_id(actor);
  s->set_sequence_number(seq);
  s->set_policy_version(version);
  for (int length : episode_lengths) {
    s->add_episode_lengths(length);
    s->add_episode_returns(static_cast<float>(length));
  }
  EnvSpec* env = s->mutable_env();
  env->set_id("CartPole-v1");
  env->set_observation_size(4);
  env->set_num_discrete_actions(2);
  return s;
}

// Records the acks of one stream. Its state is shared with the callback:
// the learner (destroyed after the test's AckLog when declared before it)
// may still acknowledge while it stops.
struct AckLog {
  struct State {
    absl::Mutex mu;
    std::vector<RolloutAck> acks ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state = std::make_shared<State>();
  AckCallback Callback() {
    return [state = state](const RolloutAck& ack) {
      absl::MutexLock lock(&state->mu);
      state->acks.push_back(ack);
    };
  }
  bool WaitForAck(int64_t seq) {
    absl::MutexLock lock(&state->mu);
    auto has = [&]() {
      state->mu.AssertReaderHeld();
      return !state->acks.empty() &&
             state->acks.back().acked_sequence_number() >= seq;
    };
    return state->mu.AwaitWithTimeout(absl::Condition(&has), absl::Seconds(60));
  }
  RolloutAck Last() {
    absl::MutexLock lock(&state->mu);
    return state->acks.empty() ? RolloutAck() : state->acks.back();
  }
};

// Until `version` is both counted and published: the status counts an
// update before the policy of that version is published, so a test that
// reads LatestPolicy() after the count alone may read the one before.
inline bool WaitForVersion(LearnerCore& core, int64_t version) {
  return WaitFor(
      [&] {
        return core.GetStatus().policy_version() >= version &&
               core.LatestPolicy()->version() >= version;
      },
      absl::Seconds(60), absl::Milliseconds(5));
}

// Creates the two ranks of a gang (real gloo on loopback, in-process) at
// once (Create broadcasts rank 0's state: both ranks must be in it), each
// with the options `make(rank)` gives and its collective added here. A rank
// that failed is null (and the test has failed).
inline std::vector<std::unique_ptr<LearnerCore>> StartGang(
    const RendezvousServer& server, const std::string& gang_id,
    const std::function<LearnerOptions(int)>& make) {
  std::vector<std::unique_ptr<LearnerCore>> cores(2);
  std::vector<std::thread> starts;
  for (int rank = 0; rank < 2; ++rank) {
    starts.emplace_back([&, rank] {
      CollectiveOptions c;
      c.rank = rank;
      c.world_size = 2;
      c.rendezvous_address = absl::StrCat("127.0.0.1:", server.port());
      c.gang_id = gang_id;
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<Collective> collective,
                           ConnectCollective(c));
      LearnerOptions options = make(rank);
      options.collective = std::move(collective);
      ASSERT_OK_AND_ASSIGN(cores[rank], LearnerCore::Create(options));
    });
  }
  for (auto& t : starts) t.join();
  return cores;
}

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_CORE_TEST_UTIL_H_
