#include "learner/learner_core.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/c10d_collective.h"
#include "learner/checkpoint.h"
#include "learner/segment_ledger.h"
#include "policy/compute_device.h"
#include "policy/cuda_runtime.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"
#include "telemetry/client/recording_transport.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// LibTorch caches its answer about CUDA at the first question (seeding asks
// it): load the CUDA runtime first, as the learner's main does.
class CudaRuntimeFirst : public ::testing::Environment {
 public:
  void SetUp() override { PrepareCudaRuntime(); }
};
const auto* const kCudaRuntimeFirst =
    ::testing::AddGlobalTestEnvironment(new CudaRuntimeFirst);

// Finite (float's maximum is 3.4e38), but the value loss overflows.
// Finite but huge: a value estimate no network of the run could give.
constexpr float kHugeValue = 3e38f;

// CartPole, 2 envs x 4 steps per segment, one minibatch and epoch per
// update, one actor unless `extra` says otherwise.
RunSpec Spec(const std::string& extra, int64_t total_env_steps = 1000000) {
  return SmallRunSpec(absl::StrCat(
      "name: t\nenvs_per_actor: 2\nsegment_length: 4\ntotal_env_steps: ",
      total_env_steps, "\nppo: {num_minibatches: 1, num_epochs: 1}\n", extra));
}

// Rewards 1; the first step's value `first_value`. With `episode_lengths`
// (one per env), each env ends an episode of that many steps and that
// return (CartPole pays 1 a step) at the segment's last step.
std::unique_ptr<RolloutSegment> Segment(
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
bool WaitForVersion(LearnerCore& core, int64_t version) {
  return WaitFor(
      [&] {
        return core.GetStatus().policy_version() >= version &&
               core.LatestPolicy()->version() >= version;
      },
      absl::Seconds(60), absl::Milliseconds(5));
}

TEST(LearnerCoreTest, SyncUpdatesOnceEveryConnectedActorContributed) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 2}");
  options.run_id = "t";
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  ASSERT_NE(core->LatestPolicy(), nullptr);
  EXPECT_EQ(core->LatestPolicy()->version(), 1);
  AckLog a0, a1;
  const int64_t s0 = core->OpenStream(0, a0.Callback());
  const int64_t s1 = core->OpenStream(1, a1.Callback());
  ASSERT_OK(core->SubmitSegment(s0, Segment(0, 1, 1)));
  EXPECT_EQ(core->GetStatus().policy_version(), 1);  // waits for actor 1
  ASSERT_OK(core->SubmitSegment(s1, Segment(1, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  EXPECT_TRUE(a0.WaitForAck(1));
  EXPECT_TRUE(a1.WaitForAck(1));
  // Version 2 was trained on both segments (2 x 8 steps): had it not waited
  // for actor 1, it would hold 8 steps and actor 1's segment, collected by
  // version 1, would have been dropped as stale.
  const LearnerStatus after_first = core->GetStatus();
  EXPECT_EQ(after_first.policy_version(), 2);
  EXPECT_EQ(after_first.env_steps(), 16);
  EXPECT_EQ(after_first.updates(), 1);
  EXPECT_EQ(after_first.segments_dropped_stale(), 0);
  EXPECT_EQ(core->LatestPolicy()->version(), 2);

  // Actor 1 goes away: actor 0 alone completes the next batch.
  core->CloseStream(s1);
  ASSERT_OK(core->SubmitSegment(s0, Segment(0, 2, 2)));
  ASSERT_TRUE(WaitForVersion(*core, 3));
}

// Issue 46: a placed actor reporting in-range episodes far above the real
// ones (264 against ~23) moved the mean return unflagged. Each actor's
// episodes are kept apart (learner/actor_mean_return by actor) and the
// actor that stands apart is counted (learner/actors_apart).
TEST(LearnerCoreTest, EachActorsEpisodesAreKeptApartAndAForgerIsCounted) {
  auto sent = std::make_shared<SentPoints>();
  EmitterOptions emitter_options;
  emitter_options.batch_interval = absl::Milliseconds(10);
  Emitter emitter(std::make_unique<RecordingTransport>(sent), emitter_options);
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 3}");
  options.run_id = "t";
  options.emitter = &emitter;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks[3];
  int64_t streams[3];
  for (int actor = 0; actor < 3; ++actor) {
    streams[actor] = core->OpenStream(actor, acks[actor].Callback());
  }
  // 6 updates, 2 episodes per actor each: 12 episodes per actor.
  for (int64_t v = 1; v <= 6; ++v) {
    ASSERT_OK(core->SubmitSegment(
        streams[0], Segment(0, v, v, 0, {20 + static_cast<int>(v), 24})));
    ASSERT_OK(core->SubmitSegment(
        streams[1], Segment(1, v, v, 0, {22, 27 - static_cast<int>(v)})));
    ASSERT_OK(core->SubmitSegment(streams[2], Segment(2, v, v, 0, {264, 264})));
    ASSERT_TRUE(WaitForVersion(*core, v + 1)) << v;
  }
  ASSERT_OK(emitter.Flush(absl::Seconds(30)));
  std::map<std::string, double> last_mean;  // by actor
  for (const MetricPoint& p : sent->Named("learner/actor_mean_return")) {
    ASSERT_EQ(p.labels().count("actor"), 1u);
    last_mean[p.labels().at("actor")] = p.value();
  }
  ASSERT_EQ(last_mean.size(), 3u);
  EXPECT_NEAR(last_mean["0"], (21 + 22 + 23 + 24 + 25 + 26 + 6 * 24) / 12.0,
              1e-6);
  EXPECT_NEAR(last_mean["2"], 264, 1e-6);
  const std::vector<MetricPoint> apart = sent->Named("learner/actors_apart");
  ASSERT_EQ(apart.size(), 6u);
  // Under 10 episodes each for the first 4 updates: nobody compared.
  EXPECT_EQ(apart[3].value(), 0);
  EXPECT_EQ(apart.back().value(), 1);
}

// A league run's segments carry the trained seats' rows only (2 of the 4
// rows here, the copies' agents_per_env 2): each counts every row's steps,
// and its games go to <run_dir>/league/matches.csv and to telemetry.
TEST(LearnerCoreTest, ALeaguesSegmentsCountEveryRowAndItsGamesAreKept) {
  const std::string dir = MakeTestDir();
  auto sent = std::make_shared<SentPoints>();
  EmitterOptions emitter_options;
  emitter_options.batch_interval = absl::Milliseconds(10);
  Emitter emitter(std::make_unique<RecordingTransport>(sent), emitter_options);
  LearnerOptions options;
  options.spec = Spec(
      "env: {id: Duel-v0, plugin: duel, agents_per_env: 2, "
      "observation_size: 4, num_discrete_actions: 2, reward_low: -1, "
      "reward_high: 1}\n"
      "envs_per_actor: 4\nleague: {snapshot_interval: 1}\n");
  options.run_id = "t";
  options.run_dir = dir;
  options.emitter = &emitter;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  // Both copies' trained seats end a game of 4 steps at the last step.
  const auto league_segment = [](int64_t seq, std::vector<float> games) {
    std::unique_ptr<RolloutSegment> s =
        Segment(0, seq, seq, 0, std::vector<int>(games.size(), 4));
    s->mutable_env()->set_id("Duel-v0");
    s->mutable_env()->set_plugin("duel");
    s->mutable_env()->set_agents_per_env(2);
    s->mutable_env()->set_reward_low(-1);
    s->mutable_env()->set_reward_high(1);
    s->clear_episode_returns();
    for (size_t g = 0; g < games.size(); ++g) {
      s->add_episode_returns(games[g]);
      LeagueMatchResult* m = s->add_league_matches();
      m->set_env_steps(16 * (seq - 1));
      m->set_learner_version(seq);
      m->set_opponent_version(static_cast<int64_t>(g) % seq);
      m->set_learner_return(games[g]);
    }
    return s;
  };
  ASSERT_OK(core->SubmitSegment(stream, league_segment(1, {1, -1})));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  ASSERT_OK(core->SubmitSegment(stream, league_segment(2, {0, 1})));
  ASSERT_TRUE(WaitForVersion(*core, 3));
  // 4 steps x 2 rows a segment, each row standing for 2: 16 env steps.
  EXPECT_EQ(core->GetStatus().env_steps(), 32);
  // The full segment's rows are refused with the shape expected.
  std::unique_ptr<RolloutSegment> full = league_segment(3, {});
  Rollout wide = Rollout::Allocate(4, 4, 4, 0);
  ASSERT_OK(EncodeSegment(wide, full.get()));
  EXPECT_THAT(core->SubmitSegment(stream, std::move(full)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Games an actor cannot have played, or that are not its episodes.
  std::unique_ptr<RolloutSegment> forged = league_segment(3, {1});
  forged->mutable_league_matches(0)->set_opponent_version(3);
  EXPECT_THAT(core->SubmitSegment(stream, std::move(forged)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.league_matches[0]: ")));
  // A fixed member's game (a negative version) in a run without members.
  forged = league_segment(3, {1});
  forged->mutable_league_matches(0)->set_opponent_version(-1);
  EXPECT_THAT(core->SubmitSegment(stream, std::move(forged)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("opponent_version in [0, learner_version)")));
  forged = league_segment(3, {1});
  forged->add_league_matches()->CopyFrom(forged->league_matches(0));
  EXPECT_THAT(core->SubmitSegment(stream, std::move(forged)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("2 games for 1 episodes")));
  forged = league_segment(3, {1});
  forged->mutable_league_matches(0)->set_learner_return(-1);
  EXPECT_THAT(core->SubmitSegment(stream, std::move(forged)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("learner_return the episode's, 1")));

  std::ifstream file(std::filesystem::path(dir) / "league" / "matches.csv");
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(),
            "env_steps,learner_version,opponent_version,learner_return\n"
            "0,1,0,1\n0,1,0,-1\n16,2,0,0\n16,2,1,1\n");
  ASSERT_OK(emitter.Flush(absl::Seconds(30)));
  const std::vector<MetricPoint> won = sent->Named("league/won");
  ASSERT_EQ(won.size(), 2u);
  EXPECT_NEAR(won[0].value(), 1.0 / 2, 1e-9);
  EXPECT_NEAR(won[1].value(), 2.0 / 4, 1e-9);
  EXPECT_NEAR(sent->Named("league/drew").back().value(), 1.0 / 4, 1e-9);
  EXPECT_NEAR(sent->Named("league/lost").back().value(), 1.0 / 4, 1e-9);
  EXPECT_EQ(sent->Named("league/games").back().value(), 4);
  EXPECT_EQ(sent->Named("league/newest_opponent").back().value(), 1);
  EXPECT_EQ(won[1].step(), 32);

  // A learner resumed from the checkpoint sends an actor that starts
  // again the same versions as this one: 0 and 1 (version 3 is league
  // version 2, the actor's own).
  const std::shared_ptr<const PolicyUpdate> before =
      core->LatestPolicyWithLeaguePool();
  ASSERT_EQ(before->league_pool_size(), 2);
  core->Stop();
  ASSERT_OK_AND_ASSIGN(auto resumed, LearnerCore::Create(options));
  EXPECT_EQ(resumed->GetStatus().policy_version(), 3);
  const std::shared_ptr<const PolicyUpdate> after =
      resumed->LatestPolicyWithLeaguePool();
  ASSERT_EQ(after->league_pool_size(), 2);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(after->league_pool(i).version(), i);
    ASSERT_EQ(after->league_pool(i).parameters_size(),
              before->league_pool(i).parameters_size());
    for (int p = 0; p < before->league_pool(i).parameters_size(); ++p) {
      EXPECT_EQ(after->league_pool(i).parameters(p).SerializeAsString(),
                before->league_pool(i).parameters(p).SerializeAsString());
    }
  }
  EXPECT_EQ(after->version(), 3);
}

// A run without a league takes no league games.
TEST(LearnerCoreTest, GamesOfARunWithoutALeagueAreRefused) {
  LearnerOptions options;
  options.spec = Spec("");
  options.run_id = "t";
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  std::unique_ptr<RolloutSegment> s = Segment(0, 1, 1, 0, {4});
  LeagueMatchResult* m = s->add_league_matches();
  m->set_learner_version(1);
  m->set_learner_return(4);
  EXPECT_THAT(core->SubmitSegment(stream, std::move(s)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the run has no league block")));
}

// A segment of a run of two policies (PoliciesSpec): rows 0 and 2 are
// red's (agent 0 of each copy), 1 and 3 blue's; rows 0 and 1 end an episode
// of 4 steps at the last step, red's won (1) and blue's lost (-1).
std::unique_ptr<RolloutSegment> PoliciesSegment(int actor, int64_t seq,
                                                bool with_rows = true) {
  Rollout r = Rollout::Allocate(4, 4, 4, 0);
  r.observations.uniform_(-0.05, 0.05);
  r.rewards.zero_();
  r.rewards[3][0] = 1;
  r.rewards[3][1] = -1;
  r.terminated[3][0] = 1;
  r.terminated[3][1] = 1;
  auto s = std::make_unique<RolloutSegment>();
  EXPECT_OK(EncodeSegment(r, s.get()));
  s->set_run_id("t");
  s->set_actor_id(actor);
  s->set_sequence_number(seq);
  s->set_policy_version(seq);
  for (const float ret : {1.0f, -1.0f}) {
    s->add_episode_returns(ret);
    s->add_episode_lengths(4);
  }
  if (with_rows) {
    s->add_episode_rows(0);
    s->add_episode_rows(1);
  }
  EnvSpec* env = s->mutable_env();
  env->set_id("Duel-v0");
  env->set_plugin("duel");
  env->set_agents_per_env(2);
  env->set_observation_size(4);
  env->set_num_discrete_actions(2);
  env->set_reward_low(-1);
  env->set_reward_high(1);
  return s;
}

// Duel-v0 (2 agents) in 4 rows; red plays agent 0, blue agent 1 with a
// network of its own.
RunSpec PoliciesSpec(const std::string& extra) {
  return Spec(absl::StrCat(
      "env: {id: Duel-v0, plugin: duel, agents_per_env: 2, "
      "observation_size: 4, num_discrete_actions: 2, reward_low: -1, "
      "reward_high: 1}\n"
      "envs_per_actor: 4\n"
      "policies: [{name: red, agents: [0]},\n"
      "  {name: blue, agents: [1], policy: {hidden_sizes: [8]}}]\n",
      extra));
}

// Several policies (issue 50): one learner trains each on its agents'
// rows with its own network and settings, publishes them all, counts only
// the first's episodes for the run's return, labels each one's figures,
// and writes and resumes each one's checkpoints beside the run's.
TEST(LearnerCoreTest, SeveralPoliciesTrainEachOnItsAgentsRows) {
  const std::string dir = MakeTestDir();
  auto sent = std::make_shared<SentPoints>();
  EmitterOptions emitter_options;
  emitter_options.batch_interval = absl::Milliseconds(10);
  Emitter emitter(std::make_unique<RecordingTransport>(sent), emitter_options);
  LearnerOptions options;
  options.spec = PoliciesSpec("checkpoint_interval: 1\n");
  options.run_id = "t";
  options.run_dir = dir;
  options.emitter = &emitter;
  std::string blue_before_stop;
  {
    ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
    AckLog acks;
    const int64_t stream = core->OpenStream(0, acks.Callback());
    const std::shared_ptr<const PolicyUpdate> first = core->LatestPolicy();
    ASSERT_EQ(first->policies_size(), 1);
    EXPECT_EQ(first->policies(0).name(), "blue");
    // Blue's own network: its hidden layer has 8 units, red's the run's.
    bool eight = false;
    for (const NamedTensor& t : first->policies(0).parameters()) {
      eight = eight || (t.tensor().shape_size() == 2 &&
                        t.tensor().shape(0) == 8 && t.tensor().shape(1) == 4);
    }
    EXPECT_TRUE(eight);
    // Without the episodes' rows a segment cannot say whose they are.
    EXPECT_THAT(core->SubmitSegment(stream, PoliciesSegment(0, 1, false)),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("segment.episode_rows: 0 rows for 2")));
    std::unique_ptr<RolloutSegment> far = PoliciesSegment(0, 1);
    far->set_episode_rows(1, 4);
    EXPECT_THAT(core->SubmitSegment(stream, std::move(far)),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("segment.episode_rows[1]: 4")));
    ASSERT_OK(core->SubmitSegment(stream, PoliciesSegment(0, 1)));
    ASSERT_TRUE(WaitForVersion(*core, 2));
    ASSERT_OK(core->SubmitSegment(stream, PoliciesSegment(0, 2)));
    ASSERT_TRUE(WaitForVersion(*core, 3));
    const std::shared_ptr<const PolicyUpdate> last = core->LatestPolicy();
    ASSERT_EQ(last->policies_size(), 1);
    // Blue trained (its weights moved) and both counted every row's steps.
    EXPECT_NE(last->policies(0).SerializeAsString(),
              first->policies(0).SerializeAsString());
    EXPECT_EQ(core->GetStatus().env_steps(), 32);
    // The run's return is red's (1), not the mean of both (0); each
    // policy's is in the progress (2 segments, one episode each).
    const RunProgress progress = core->GetStatus().progress();
    EXPECT_EQ(progress.mean_return(), 1);
    EXPECT_EQ(progress.episodes(), 2);
    ASSERT_EQ(progress.policies_size(), 2);
    EXPECT_EQ(progress.policies(0).name(), "red");
    EXPECT_EQ(progress.policies(0).mean_return(), 1);
    EXPECT_EQ(progress.policies(0).episodes(), 2);
    EXPECT_EQ(progress.policies(1).name(), "blue");
    EXPECT_EQ(progress.policies(1).mean_return(), -1);
    EXPECT_EQ(progress.policies(1).episodes(), 2);
    blue_before_stop = last->policies(0).SerializeAsString();
    core->Stop();
  }
  for (const char* root : {"/checkpoints", "/policies/blue/checkpoints"}) {
    ASSERT_OK_AND_ASSIGN(const std::string latest,
                         LatestCheckpoint(dir + root));
    EXPECT_THAT(latest, HasSubstr("ckpt-000000000002")) << root;
  }
  ASSERT_OK(emitter.Flush(absl::Seconds(30)));
  std::map<std::string, int> loss_by_policy;
  for (const MetricPoint& p : sent->Named("learner/policy_loss")) {
    auto it = p.labels().find("policy");
    ++loss_by_policy[it == p.labels().end() ? "" : it->second];
  }
  EXPECT_EQ(loss_by_policy,
            (std::map<std::string, int>{{"blue", 2}, {"red", 2}}));
  // A new learner resumes both at update 2, blue's weights as they were.
  options.emitter = nullptr;
  ASSERT_OK_AND_ASSIGN(auto resumed, LearnerCore::Create(options));
  EXPECT_EQ(resumed->GetStatus().updates(), 2);
  ASSERT_EQ(resumed->LatestPolicy()->policies_size(), 1);
  EXPECT_EQ(resumed->LatestPolicy()->policies(0).SerializeAsString(),
            blue_before_stop);
  // Each policy's returns and episodes come back with the checkpoint.
  AckLog resumed_acks;
  const int64_t resumed_stream =
      resumed->OpenStream(0, resumed_acks.Callback());
  ASSERT_OK(resumed->SubmitSegment(resumed_stream, PoliciesSegment(0, 3)));
  ASSERT_TRUE(WaitForVersion(*resumed, 4));
  const RunProgress after = resumed->GetStatus().progress();
  ASSERT_EQ(after.policies_size(), 2);
  EXPECT_EQ(after.policies(1).episodes(), 3);
  EXPECT_EQ(after.policies(1).mean_return(), -1);
  resumed->Stop();
  // Blue's checkpoint missing: the resume says whose.
  std::filesystem::remove_all(dir + "/policies/blue");
  EXPECT_THAT(LearnerCore::Create(options).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("policy blue's checkpoint beside")));
}

TEST(LearnerCoreTest, StaleAndDuplicateSegmentsAreDroppedAndCounted) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  // Resent after a reconnect: dropped, acked again.
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  // Collected by version 1 while the learner is at 2: stale in SYNC mode.
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 2, 1)));
  ASSERT_TRUE(log.WaitForAck(2));
  const LearnerStatus status = core->GetStatus();
  EXPECT_EQ(status.segments_duplicate(), 1);
  EXPECT_EQ(status.segments_dropped_stale(), 1);
  EXPECT_EQ(status.policy_version(), 2);
  EXPECT_EQ(log.Last().dropped_stale(), 1);
}

TEST(LearnerCoreTest, ARestartedActorProcessNumbersAfresh) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  auto first = Segment(0, 1, 1);
  first->set_actor_incarnation(111);
  ASSERT_OK(core->SubmitSegment(s, std::move(first)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  // Same actor id, new process: sequence number 1 again is not a duplicate.
  core->CloseStream(s);
  const int64_t s2 = core->OpenStream(0, log.Callback());
  auto second = Segment(0, 1, 2);
  second->set_actor_incarnation(222);
  ASSERT_OK(core->SubmitSegment(s2, std::move(second)));
  ASSERT_TRUE(WaitForVersion(*core, 3));
  EXPECT_EQ(core->GetStatus().segments_duplicate(), 0);
}

// Two processes streaming as one actor (one replaced, or an impostor) do
// not take the id from each other in turn (each flip restarted the
// numbering and froze the run with no error): the newest keeps it, the
// replaced one is refused with the reason.
TEST(LearnerCoreTest, AReplacedActorProcessCannotTakeItsIdBack) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  auto first = Segment(0, 1, 1);
  first->set_actor_incarnation(111);
  ASSERT_OK(core->SubmitSegment(s, std::move(first)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  const int64_t s2 = core->OpenStream(0, log.Callback());
  auto newer = Segment(0, 1, 2);
  newer->set_actor_incarnation(222);
  ASSERT_OK(core->SubmitSegment(s2, std::move(newer)));
  ASSERT_TRUE(WaitForVersion(*core, 3));
  const int64_t rejected = core->GetStatus().segments_rejected();
  auto stale = Segment(0, 2, 2);
  stale->set_actor_incarnation(111);
  EXPECT_THAT(core->SubmitSegment(s, std::move(stale)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("actor 0: process 111 was replaced by "
                                 "process 222")));
  EXPECT_EQ(core->GetStatus().segments_rejected(), rejected + 1);
  // The newer one goes on, its numbering intact.
  auto next = Segment(0, 2, 3);
  next->set_actor_incarnation(222);
  ASSERT_OK(core->SubmitSegment(s2, std::move(next)));
  ASSERT_TRUE(WaitForVersion(*core, 4));
  EXPECT_EQ(core->GetStatus().segments_duplicate(), 0);
}

TEST(LearnerCoreTest, MalformedSegmentsAreRejectedAndHarmNothing) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}");
  options.run_id = "t";
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());

  auto bad_shape = Segment(0, 1, 1);
  bad_shape->mutable_rewards()->set_shape(0, 5);
  EXPECT_THAT(core->SubmitSegment(s, std::move(bad_shape)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.rewards")));

  auto wrong_run = Segment(0, 1, 1);
  wrong_run->set_run_id("other");
  EXPECT_THAT(core->SubmitSegment(s, std::move(wrong_run)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.run_id")));
  EXPECT_THAT(core->SubmitSegment(s, Segment(0, 0, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.sequence_number")));
  EXPECT_THAT(core->SubmitSegment(s, Segment(3, 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.actor_id")));
  EXPECT_EQ(core->GetStatus().segments_rejected(), 4);

  // The good segment after them is used normally.
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
}

TEST(LearnerCoreTest, AsyncToleratesLagUpToTheLimit) {
  LearnerOptions options;
  options.spec = Spec(
      "sync_mode: ASYNC\nmax_policy_lag: 1\n"
      "resources: {num_actors: 1}");
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 2, 1)));  // lag 1: used
  ASSERT_TRUE(WaitForVersion(*core, 3));
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 3, 1)));  // lag 2: dropped
  ASSERT_TRUE(log.WaitForAck(3));
  EXPECT_EQ(core->GetStatus().segments_dropped_stale(), 1);
  EXPECT_EQ(core->GetStatus().policy_version(), 3);
}

// While an update runs, segments pile up for the PPO thread; the learner's
// byte budget bounds them over all streams. A segment beyond it is refused
// (counted, not recorded, so the actor's resend is taken, not called a
// duplicate), and the budget frees up as the PPO thread takes segments.
TEST(LearnerCoreTest, SegmentsBeyondTheByteBudgetAreRefusedUntilItFreesUp) {
  // One segment of each actor fits (their ids make their sizes differ).
  const int64_t both_bytes = static_cast<int64_t>(
      Segment(0, 1, 1)->ByteSizeLong() + Segment(1, 1, 1)->ByteSizeLong());
  auto budget = std::make_shared<SegmentBudget>(both_bytes);
  absl::Notification in_update, release;
  LearnerOptions options;
  options.spec = Spec(
      "sync_mode: ASYNC\nmax_policy_lag: 100\n"
      "resources: {num_actors: 2}");
  options.segment_budget = budget;
  options.after_update_for_testing = [&](int64_t update, ActorCritic&) {
    if (update != 1) return;
    in_update.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(60));
  };
  AckLog a0, a1;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  struct ReleaseOnExit {
    absl::Notification* release;
    ~ReleaseOnExit() {
      if (!release->HasBeenNotified()) release->Notify();
    }
  } release_on_exit{&release};
  const int64_t s0 = core->OpenStream(0, a0.Callback());
  const int64_t s1 = core->OpenStream(1, a1.Callback());
  ASSERT_OK(core->SubmitSegment(s0, Segment(0, 1, 1)));
  ASSERT_OK(core->SubmitSegment(s1, Segment(1, 1, 1)));
  ASSERT_TRUE(in_update.WaitForNotificationWithTimeout(absl::Seconds(60)));

  // The PPO thread is in update 1: two segments fit, the third does not.
  ASSERT_OK(core->SubmitSegment(s0, Segment(0, 2, 1)));
  ASSERT_OK(core->SubmitSegment(s1, Segment(1, 2, 1)));
  EXPECT_EQ(budget->held_bytes(), both_bytes);
  EXPECT_THAT(core->SubmitSegment(s0, Segment(0, 3, 1)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("segment budget spent"),
                             HasSubstr("(--max_inflight_segment_mb)"))));
  EXPECT_EQ(budget->refused(), 1);
  EXPECT_EQ(budget->held_bytes(), both_bytes);

  release.Notify();
  ASSERT_TRUE(WaitFor([&] { return budget->held_bytes() == 0; },
                      absl::Seconds(60), absl::Milliseconds(5)));
  // The resend is taken; nothing accepted was lost.
  ASSERT_OK(core->SubmitSegment(s0, Segment(0, 3, 1)));
  ASSERT_OK(core->SubmitSegment(s1, Segment(1, 3, 1)));
  EXPECT_TRUE(a0.WaitForAck(3));
  EXPECT_TRUE(a1.WaitForAck(3));
  const LearnerStatus status = core->GetStatus();
  EXPECT_EQ(status.updates(), 3);
  EXPECT_EQ(status.env_steps(), 3 * 2 * 8);
  EXPECT_EQ(status.segments_duplicate(), 0);
  EXPECT_EQ(budget->refused(), 1);
  EXPECT_TRUE(WaitFor([&] { return budget->held_bytes() == 0; },
                      absl::Seconds(60), absl::Milliseconds(5)));
}

TEST(LearnerCoreTest, SubscribersGetEveryNewVersionAndTheFinalOne) {
  LearnerOptions options;
  options.spec = Spec("resources: {num_actors: 1}", /*total_env_steps=*/16);
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  absl::Mutex mu;
  std::vector<int64_t> versions;
  bool final = false;
  std::shared_ptr<const PolicyUpdate> latest;
  core->Subscribe(
      [&](std::shared_ptr<const PolicyUpdate> u) {
        absl::MutexLock lock(&mu);
        versions.push_back(u->version());
        final |= u->final();
      },
      &latest);
  EXPECT_EQ(latest->version(), 1);
  AckLog log;
  const int64_t s = core->OpenStream(0, log.Callback());
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 1, 1)));
  ASSERT_OK(core->SubmitSegment(s, Segment(0, 2, 2)));
  ASSERT_TRUE(core->WaitUntilDone(absl::Seconds(60)));
  EXPECT_OK(core->final_status());
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(final);
  EXPECT_EQ(versions.front(), 2);
  EXPECT_EQ(core->GetStatus().env_steps(), 16);
}

// A learner stopped from outside (SIGTERM, a new assignment, a Slurm
// requeue) keeps the updates made since its last periodic checkpoint.
TEST(LearnerCoreTest, StoppingWritesACheckpointOfTheLatestUpdates) {
  const std::string dir = MakeTestDir();
  LearnerOptions options;
  options.spec = Spec("checkpoint_interval: 1000");
  options.run_id = "t";
  options.run_dir = dir;
  {
    ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
    AckLog acks;
    const int64_t stream = core->OpenStream(0, acks.Callback());
    ASSERT_OK(core->SubmitSegment(stream, Segment(0, 1, 1)));
    ASSERT_OK(core->SubmitSegment(stream, Segment(0, 2, 2)));
    ASSERT_TRUE(WaitForVersion(*core, 3));
    EXPECT_FALSE(LatestCheckpoint(dir + "/checkpoints").ok());  // none yet
    // Stop() writes it, and what the core says after is what it holds (the
    // learner's stop summary: it once showed a status from before).
    core->Stop();
    EXPECT_OK(LatestCheckpoint(dir + "/checkpoints").status());
    EXPECT_EQ(core->GetStatus().updates(), 2);
    // A segment after the stop changes nothing.
    core->SubmitSegment(stream, Segment(0, 3, 3)).IgnoreError();
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_EQ(core->GetStatus().updates(), 2);
    core->Stop();  // idempotent
  }
  ASSERT_OK_AND_ASSIGN(const std::string latest,
                       LatestCheckpoint(dir + "/checkpoints"));
  EXPECT_THAT(latest, HasSubstr("ckpt-000000000002"));
  // A new core resumes there.
  ASSERT_OK_AND_ASSIGN(auto resumed, LearnerCore::Create(options));
  EXPECT_EQ(resumed->GetStatus().updates(), 2);
  EXPECT_EQ(resumed->GetStatus().policy_version(), 3);
}

// A population-based training round (issue 50): a run with no checkpoint
// of its own starts from another run's newest one (weights, optimizer and
// counters; not that run's segment watermarks: its actors are not this
// run's) and ends at its round's env steps, with a final checkpoint of its
// own; the other run's checkpoints stay as they were.
TEST(LearnerCoreTest, ARoundStartsFromAnotherRunAndStopsAtItsSteps) {
  const std::string donor_dir = MakeTestDir("donor");
  constexpr uint64_t kIncarnation = 0xF00DF00DF00DF00Dull;
  auto segment = [](int64_t seq, int64_t version) {
    auto s = Segment(0, seq, version);
    s->set_actor_incarnation(kIncarnation);
    return s;
  };
  LearnerOptions donor;
  donor.spec = Spec("checkpoint_interval: 1000");
  donor.run_id = "t";
  donor.run_dir = donor_dir;
  std::string donor_weights;  // its published parameters, serialized
  {
    ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(donor));
    AckLog acks;
    const int64_t stream = core->OpenStream(0, acks.Callback());
    ASSERT_OK(core->SubmitSegment(stream, segment(1, 1)));
    ASSERT_OK(core->SubmitSegment(stream, segment(2, 2)));
    ASSERT_TRUE(WaitForVersion(*core, 3));
    core->Stop();  // ckpt 2, at 16 env steps
    for (const NamedTensor& t : core->LatestPolicy()->parameters()) {
      donor_weights += t.SerializeAsString();
    }
  }
  ASSERT_OK_AND_ASSIGN(const std::string donor_latest,
                       LatestCheckpoint(donor_dir + "/checkpoints"));

  LearnerOptions round;
  round.spec = Spec("checkpoint_interval: 1000");
  round.run_id = "t";
  round.run_dir = MakeTestDir("round");
  round.start_from = donor_dir;
  round.stop_env_steps = 24;  // one more update of 8 env steps
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(round));
  EXPECT_EQ(core->GetStatus().updates(), 2);
  EXPECT_EQ(core->GetStatus().policy_version(), 3);
  EXPECT_EQ(core->GetStatus().env_steps(), 16);
  std::string weights;
  for (const NamedTensor& t : core->LatestPolicy()->parameters()) {
    weights += t.SerializeAsString();
  }
  EXPECT_EQ(weights, donor_weights);
  EXPECT_FALSE(weights.empty());
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  // Sequence number 1 again, from an actor of this run: new here.
  ASSERT_OK(core->SubmitSegment(stream, segment(1, 3)));
  ASSERT_TRUE(core->WaitUntilDone(absl::Seconds(60)));
  EXPECT_OK(core->final_status());
  EXPECT_EQ(core->GetStatus().segments_duplicate(), 0);
  EXPECT_EQ(core->GetStatus().updates(), 3);
  EXPECT_EQ(core->GetStatus().env_steps(), 24);
  ASSERT_OK_AND_ASSIGN(const std::string own,
                       LatestCheckpoint(round.run_dir + "/checkpoints"));
  EXPECT_THAT(own, HasSubstr("ckpt-000000000003"));
  EXPECT_EQ(*LatestCheckpoint(donor_dir + "/checkpoints"), donor_latest);
  core->Stop();

  // Started again (the same round's run placed anew), it resumes from its
  // own checkpoint, not the donor's.
  ASSERT_OK_AND_ASSIGN(auto again, LearnerCore::Create(round));
  EXPECT_EQ(again->GetStatus().updates(), 3);
  again->Stop();

  // Nothing to start from: refused, naming where it looked.
  LearnerOptions empty = round;
  empty.run_dir = MakeTestDir("empty");
  empty.start_from = MakeTestDir("nothing");
  EXPECT_THAT(LearnerCore::Create(empty).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("start_from: no complete checkpoint "
                                       "under"),
                             HasSubstr(empty.start_from))));
}

// A checkpoint written before the counters moved into TrainingState
// (learner/testdata, examples/cartpole.yaml at update 233) resumes, and
// the next checkpoint is written in the new form and resumes too.
TEST(LearnerCoreTest, ACheckpointWrittenBeforeTrainingStateResumes) {
  const std::string dir = MakeTestDir();
  const std::filesystem::path kept =
      std::filesystem::path(dir) / "checkpoints" / "ckpt-000000000233";
  std::filesystem::create_directories(kept.parent_path());
  std::filesystem::copy("learner/testdata/learner_checkpoint_2026_11", kept);
  LearnerOptions options;
  options.spec = Spec("policy: {hidden_sizes: [64, 64]}");
  options.run_id = "t";
  options.run_dir = dir;
  {
    ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
    EXPECT_EQ(core->GetStatus().updates(), 233);
    EXPECT_EQ(core->GetStatus().policy_version(), 234);
    EXPECT_EQ(core->GetStatus().env_steps(), 233 * 256);
    AckLog acks;
    const int64_t stream = core->OpenStream(0, acks.Callback());
    ASSERT_OK(core->SubmitSegment(stream, Segment(0, 1, 234)));
    ASSERT_TRUE(WaitForVersion(*core, 235));
    core->Stop();  // writes checkpoint 234
  }
  ASSERT_OK_AND_ASSIGN(const std::string latest,
                       LatestCheckpoint(dir + "/checkpoints"));
  EXPECT_THAT(latest, HasSubstr("ckpt-000000000234"));
  ASSERT_OK_AND_ASSIGN(auto resumed, LearnerCore::Create(options));
  EXPECT_EQ(resumed->GetStatus().updates(), 234);
  EXPECT_EQ(resumed->GetStatus().env_steps(), 233 * 256 + 8);
}

// A learner killed after a checkpoint but before its ack reached the actor:
// the actor resends the segment to the resumed learner, which must not use
// it a second time (ASYNC with lag 1 would otherwise accept it).
TEST(LearnerCoreTest, AResumedLearnerDoesNotUseAResentSegmentTwice) {
  const std::string dir = MakeTestDir();
  LearnerOptions options;
  options.spec = Spec(
      "sync_mode: ASYNC\nmax_policy_lag: 1\ncheckpoint_interval: 1\n"
      "resources: {num_actors: 1}");
  options.run_id = "t";
  options.run_dir = dir;
  auto segment = [](int64_t seq, int64_t version) {
    auto s = Segment(0, seq, version);
    s->set_actor_incarnation(0xF00DF00DF00DF00Dull);  // high bit set
    return s;
  };
  {
    ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
    AckLog acks;
    const int64_t stream = core->OpenStream(0, acks.Callback());
    ASSERT_OK(core->SubmitSegment(stream, segment(1, 1)));
    ASSERT_TRUE(WaitForVersion(*core, 2));
  }
  ASSERT_OK_AND_ASSIGN(auto resumed, LearnerCore::Create(options));
  ASSERT_EQ(resumed->GetStatus().policy_version(), 2);
  AckLog acks;
  const int64_t stream = resumed->OpenStream(0, acks.Callback());
  ASSERT_OK(resumed->SubmitSegment(stream, segment(1, 1)));  // the resend
  ASSERT_TRUE(acks.WaitForAck(1));
  EXPECT_EQ(resumed->GetStatus().segments_duplicate(), 1);
  EXPECT_EQ(resumed->GetStatus().updates(), 1);
  // The actor's next segment is new, and used.
  ASSERT_OK(resumed->SubmitSegment(stream, segment(2, 2)));
  ASSERT_TRUE(WaitForVersion(*resumed, 3));
  EXPECT_EQ(resumed->GetStatus().segments_duplicate(), 1);

  // A new process under the same actor id numbers afresh, even after a
  // resume.
  resumed->CloseStream(stream);
  const int64_t again = resumed->OpenStream(0, acks.Callback());
  auto fresh = Segment(0, 1, 3);
  fresh->set_actor_incarnation(42);
  ASSERT_OK(resumed->SubmitSegment(again, std::move(fresh)));
  ASSERT_TRUE(WaitForVersion(*resumed, 4));
  EXPECT_EQ(resumed->GetStatus().segments_duplicate(), 1);

  // The ledger tells the same story: three updates, three segments, each
  // used once.
  const std::string text = ReadTestFile(SegmentLedgerPath(dir, 0));
  const SegmentLedgerAudit audit = AuditSegmentLedger(text);
  EXPECT_THAT(audit.violations, ::testing::IsEmpty()) << text;
  EXPECT_EQ(audit.resumes, 2) << text;
  EXPECT_EQ(audit.updates, 3) << text;
  EXPECT_EQ(audit.segments, 3) << text;
}

// Creates the two ranks of a gang (real gloo on loopback, in-process) at
// once (Create broadcasts rank 0's state: both ranks must be in it), each
// with the options `make(rank)` gives and its collective added here. A rank
// that failed is null (and the test has failed).
std::vector<std::unique_ptr<LearnerCore>> StartGang(
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

// A gang whose rank 0 cannot take its start state (here: nothing under
// start_from) fails on every rank at once: the other ranks are told, and
// do not wait for rank 0's state until the rendezvous times out.
TEST(LearnerCoreTest, AGangWhoseRankZeroCannotStartFailsOnEveryRank) {
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  const std::string dir = MakeTestDir();
  std::vector<absl::Status> created(2);
  std::vector<std::thread> starts;
  const absl::Time begun = absl::Now();
  for (int rank = 0; rank < 2; ++rank) {
    starts.emplace_back([&, rank] {
      CollectiveOptions c;
      c.rank = rank;
      c.world_size = 2;
      c.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
      c.gang_id = "core-test/no-start";
      absl::StatusOr<std::unique_ptr<Collective>> collective =
          ConnectCollective(c);
      if (!collective.ok()) {
        created[rank] = collective.status();
        return;
      }
      LearnerOptions options;
      options.spec = Spec("resources: {num_learners: 2, num_actors: 2}");
      options.run_id = "t";
      options.run_dir = absl::StrCat(dir, "/round-1");
      options.start_from = absl::StrCat(dir, "/round-0");
      options.collective = std::move(*collective);
      created[rank] = LearnerCore::Create(options).status();
    });
  }
  for (auto& t : starts) t.join();
  EXPECT_THAT(created[0], StatusIs(absl::StatusCode::kFailedPrecondition,
                                   HasSubstr("no complete checkpoint under")));
  EXPECT_THAT(created[1],
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("rank 0 of the gang could not take "
                                       "its start state: start_from: "),
                             HasSubstr("no complete checkpoint under"))));
  // Not at a timeout: Gloo's and the rendezvous's are minutes.
  EXPECT_LT(absl::Now() - begun, absl::Seconds(60));
}

// A gang trains every policy alike: each rank updates the others after
// the first, in the run's order, and their weights stay in sync (checked
// after every update) and are published alike on both ranks.
TEST(LearnerCoreTest, AGangTrainsEveryPolicyAlikeOnEachRank) {
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  std::vector<std::unique_ptr<LearnerCore>> cores =
      StartGang(*server, "core-test/policies", [](int) {
        LearnerOptions options;
        options.spec =
            PoliciesSpec("resources: {num_learners: 2, num_actors: 2}\n");
        options.run_id = "t";
        options.sync_check_interval = 1;
        return options;
      });
  ASSERT_NE(cores[0], nullptr);
  ASSERT_NE(cores[1], nullptr);
  const std::string blue_at_start =
      cores[0]->LatestPolicy()->policies(0).SerializeAsString();
  EXPECT_EQ(cores[1]->LatestPolicy()->policies(0).SerializeAsString(),
            blue_at_start);
  AckLog a0, a1;
  const int64_t s0 = cores[0]->OpenStream(0, a0.Callback());
  const int64_t s1 = cores[1]->OpenStream(1, a1.Callback());
  for (int64_t v = 1; v <= 2; ++v) {
    ASSERT_OK(cores[0]->SubmitSegment(s0, PoliciesSegment(0, v)));
    ASSERT_OK(cores[1]->SubmitSegment(s1, PoliciesSegment(1, v)));
    ASSERT_TRUE(WaitForVersion(*cores[0], v + 1));
    ASSERT_TRUE(WaitForVersion(*cores[1], v + 1));
  }
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_OK(cores[rank]->final_status()) << "rank " << rank;
    EXPECT_EQ(cores[rank]->GetStatus().env_steps(), 64) << "rank " << rank;
  }
  const std::string blue =
      cores[0]->LatestPolicy()->policies(0).SerializeAsString();
  EXPECT_NE(blue, blue_at_start);
  EXPECT_EQ(cores[1]->LatestPolicy()->policies(0).SerializeAsString(), blue);
}

// Two ranks of a gang (real gloo on loopback, in-process): rank 1's weights
// drift after the first update (injected); the next hash check fails the
// run on both ranks with DATA_LOSS, naming the divergence.
TEST(LearnerCoreTest, DivergedRanksFailTheRunClearly) {
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  std::vector<std::unique_ptr<LearnerCore>> cores =
      StartGang(*server, "core-test/diverge", [](int rank) {
        LearnerOptions options;
        options.spec = Spec("resources: {num_learners: 2, num_actors: 2}");
        options.run_id = "t";
        options.sync_check_interval = 2;
        if (rank == 1) {
          options.after_update_for_testing = [](int64_t update,
                                                ActorCritic& policy) {
            torch::NoGradGuard no_grad;
            if (update == 1) policy->parameters()[0].add_(1e-3);
          };
        }
        return options;
      });
  ASSERT_NE(cores[0], nullptr);
  ASSERT_NE(cores[1], nullptr);
  AckLog a0, a1;
  const int64_t s0 = cores[0]->OpenStream(0, a0.Callback());
  const int64_t s1 = cores[1]->OpenStream(1, a1.Callback());
  for (int64_t v = 1; v <= 2; ++v) {
    ASSERT_OK(cores[0]->SubmitSegment(s0, Segment(0, v, v)));
    ASSERT_OK(cores[1]->SubmitSegment(s1, Segment(1, v, v)));
    if (v == 1) {
      ASSERT_TRUE(WaitForVersion(*cores[0], 2));
      // Both ranks count the gang's steps: 2 segments of 8.
      EXPECT_EQ(cores[0]->GetStatus().env_steps(), 16);
      EXPECT_TRUE(WaitForVersion(*cores[1], 2));
      EXPECT_EQ(cores[1]->GetStatus().env_steps(), 16);
    }
  }
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(cores[rank]->WaitUntilDone(absl::Seconds(60)));
    EXPECT_THAT(cores[rank]->final_status(),
                StatusIs(absl::StatusCode::kDataLoss,
                         HasSubstr("after update 2, the weights differ")))
        << "rank " << rank;
  }
}

// The same across a gang restart: rank 0's checkpoint holds the watermarks
// of every rank's actors, so rank 1 also refuses a resend it already used.
TEST(LearnerCoreTest, AResumedGangDoesNotUseAResentSegmentTwiceOnAnyRank) {
  const std::string dir = MakeTestDir();
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  auto segment = [](int actor, int64_t seq, int64_t version) {
    auto s = Segment(actor, seq, version);
    s->set_actor_incarnation(1000 + actor);
    return s;
  };
  auto start_gang = [&](const std::string& gang_id) {
    return StartGang(*server, gang_id, [&](int) {
      LearnerOptions options;
      options.spec = Spec(
          "sync_mode: ASYNC\nmax_policy_lag: 1\ncheckpoint_interval: 1\n"
          "resources: {num_learners: 2, num_actors: 2}");
      options.run_id = "t";
      options.run_dir = dir;
      return options;
    });
  };
  {
    auto cores = start_gang("core-test/resend-1");
    ASSERT_NE(cores[0], nullptr);
    ASSERT_NE(cores[1], nullptr);
    AckLog a0, a1;
    const int64_t s0 = cores[0]->OpenStream(0, a0.Callback());
    const int64_t s1 = cores[1]->OpenStream(1, a1.Callback());
    ASSERT_OK(cores[0]->SubmitSegment(s0, segment(0, 1, 1)));
    ASSERT_OK(cores[1]->SubmitSegment(s1, segment(1, 1, 1)));
    ASSERT_TRUE(WaitForVersion(*cores[0], 2));
    ASSERT_TRUE(WaitForVersion(*cores[1], 2));
    ASSERT_TRUE(
        WaitFor([&] { return LatestCheckpoint(dir + "/checkpoints").ok(); },
                absl::Seconds(60), absl::Milliseconds(5)));
  }
  auto cores = start_gang("core-test/resend-2");
  ASSERT_NE(cores[0], nullptr);
  ASSERT_NE(cores[1], nullptr);
  ASSERT_EQ(cores[1]->GetStatus().policy_version(), 2);
  AckLog a0, a1;
  const int64_t s0 = cores[0]->OpenStream(0, a0.Callback());
  const int64_t s1 = cores[1]->OpenStream(1, a1.Callback());
  // Both actors resend the segment whose ack they never saw.
  ASSERT_OK(cores[0]->SubmitSegment(s0, segment(0, 1, 1)));
  ASSERT_OK(cores[1]->SubmitSegment(s1, segment(1, 1, 1)));
  ASSERT_TRUE(a0.WaitForAck(1));
  ASSERT_TRUE(a1.WaitForAck(1));
  EXPECT_EQ(cores[0]->GetStatus().segments_duplicate(), 1);
  EXPECT_EQ(cores[1]->GetStatus().segments_duplicate(), 1);
  // Their next segments are new: the gang updates once more, together.
  ASSERT_OK(cores[0]->SubmitSegment(s0, segment(0, 2, 2)));
  ASSERT_OK(cores[1]->SubmitSegment(s1, segment(1, 2, 2)));
  ASSERT_TRUE(WaitForVersion(*cores[0], 3));
  ASSERT_TRUE(WaitForVersion(*cores[1], 3));
  EXPECT_EQ(cores[1]->GetStatus().updates(), 2);
}

// Weights that turn non-finite are never published: the run fails naming
// the parameter, and subscribers keep the last good version.
TEST(LearnerCoreTest, NonFiniteWeightsAreNeverPublished) {
  LearnerOptions options;
  options.spec = Spec("");
  options.run_id = "t";
  options.after_update_for_testing = [](int64_t update, ActorCritic& policy) {
    torch::NoGradGuard no_grad;
    if (update == 2) policy->parameters()[0][0].fill_(NAN);
  };
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 2, 2)));
  ASSERT_TRUE(core->WaitUntilDone(absl::Seconds(60)));
  EXPECT_THAT(core->final_status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("after update 2 the policy's weights are not "
                                 "finite")));
  EXPECT_EQ(core->LatestPolicy()->version(), 2);
}

// The learner trains on the CPU only: a CUDA run is refused, naming the
// field, never trained on the CPU instead.
// Refused where no CUDA device is visible (never trained on the CPU
// instead); where one is, the first-use self-check passes and it trains.
TEST(LearnerCoreTest, ACudaRunTrainsOnlyWhereADeviceIsVisible) {
  LearnerOptions options;
  options.spec = Spec("resources: {learner_device: cuda}");
  options.run_id = "t";
  const auto core = LearnerCore::Create(options);
  if (VisibleCudaDevices().empty()) {
    ASSERT_FALSE(core.ok());
    EXPECT_THAT(core.status().message(),
                HasSubstr("resources.learner_device: \"cuda\""));
    return;
  }
  ASSERT_OK(core.status());
  AckLog acks;
  const int64_t stream = (*core)->OpenStream(0, acks.Callback());
  ASSERT_OK((*core)->SubmitSegment(stream, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(**core, 2));
}

// --profile: a Chrome trace of the first updates on the PPO thread.
TEST(LearnerCoreTest, AProfileTracesTheFirstUpdates) {
  LearnerOptions options;
  options.spec = Spec("");
  options.run_id = "t";
  options.run_dir = MakeTestDir("profile");
  options.profile_updates = 1;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 1, 1)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  core->Stop();
  const std::string trace = ReadTestFile(options.run_dir + "/profile.json");
  EXPECT_THAT(trace, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(trace, HasSubstr("aten::"));
}

// A reward outside the env's declared range (CartPole: [0, 1]) is refused
// at ingest, naming the field; it never reaches an update.
TEST(LearnerCoreTest, AnOutOfRangeRewardIsRefusedAtIngest) {
  LearnerOptions options;
  options.spec = Spec("");
  options.run_id = "t";
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  auto segment = Segment(0, 1, 1);
  float* rewards = reinterpret_cast<float*>(
      segment->mutable_rewards()->mutable_data()->data());
  rewards[3] = 3e38f;
  EXPECT_THAT(core->SubmitSegment(stream, std::move(segment)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.rewards: element 3 is 3e+38, "
                                 "outside the environment's range")));
  // The run goes on with good segments.
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 1, 1)));
  EXPECT_TRUE(WaitForVersion(*core, 2));
}

// A segment whose value estimates make the loss non-finite: that update is
// skipped (its gradients not applied), counted, and training goes on; only
// max_nonfinite_updates such updates in a row fail the run, naming the
// cause, and the update that failed it is not published.
TEST(LearnerCoreTest, NonFiniteUpdatesAreSkippedUntilTooManyInARow) {
  LearnerOptions options;
  options.spec = Spec("");
  options.run_id = "t";
  options.max_nonfinite_updates = 3;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 1, 1, kHugeValue)));
  ASSERT_TRUE(WaitForVersion(*core, 2));
  EXPECT_EQ(core->fault_counts().nonfinite_updates, 1);
  EXPECT_EQ(core->fault_counts().consecutive_nonfinite_updates, 1);
  // A good segment trains normally and ends the streak.
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 2, 2)));
  ASSERT_TRUE(WaitForVersion(*core, 3));
  EXPECT_EQ(core->fault_counts().nonfinite_updates, 1);
  EXPECT_EQ(core->fault_counts().consecutive_nonfinite_updates, 0);
  for (int64_t v = 3; v <= 5; ++v) {
    ASSERT_OK(core->SubmitSegment(stream, Segment(0, v, v, kHugeValue)));
    if (v < 5) {
      ASSERT_TRUE(WaitForVersion(*core, v + 1));
    }
  }
  ASSERT_TRUE(core->WaitUntilDone(absl::Seconds(60)));
  EXPECT_THAT(
      core->final_status(),
      StatusIs(absl::StatusCode::kInternal,
               AllOf(HasSubstr("PPO update: the loss or gradient was not "
                               "finite"),
                     HasSubstr("3 updates in a row had non-finite "
                               "minibatches"))));
  EXPECT_EQ(core->fault_counts().nonfinite_updates, 3);
  EXPECT_EQ(core->LatestPolicy()->version(), 5);
}

// The streak of skipped updates is in the checkpoint: a learner resumed
// two skips into it fails at the third, as the one before it would have.
TEST(LearnerCoreTest, AResumeKeepsTheCountOfNonFiniteUpdatesInARow) {
  LearnerOptions options;
  options.spec = Spec("checkpoint_interval: 1");
  options.run_id = "t";
  options.run_dir = MakeTestDir();
  options.max_nonfinite_updates = 3;
  {
    ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
    AckLog acks;
    const int64_t stream = core->OpenStream(0, acks.Callback());
    for (int64_t v = 1; v <= 2; ++v) {
      ASSERT_OK(core->SubmitSegment(stream, Segment(0, v, v, kHugeValue)));
      ASSERT_TRUE(WaitForVersion(*core, v + 1));
    }
    ASSERT_TRUE(
        WaitFor([&] { return core->fault_counts().checkpoints_written >= 2; },
                absl::Seconds(60)));
    core->Stop();
  }
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  EXPECT_EQ(core->fault_counts().nonfinite_updates, 2);
  EXPECT_EQ(core->fault_counts().consecutive_nonfinite_updates, 2);
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 3, 3, kHugeValue)));
  // Failed, or (counting from 0 again) skipped and trained on.
  ASSERT_TRUE(WaitFor(
      [&] {
        return core->WaitUntilDone(absl::ZeroDuration()) ||
               core->GetStatus().updates() >= 3;
      },
      absl::Seconds(60)));
  EXPECT_THAT(core->final_status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("3 updates in a row had non-finite "
                                 "minibatches")));
}

// Puts a regular file where the checkpoint directory belongs: every
// checkpoint write fails (as it would on a full disk) until it is removed.
void BlockCheckpoints(const std::string& run_dir) {
  std::ofstream(std::filesystem::path(run_dir) / "checkpoints") << "in the way";
}

// Checkpoints that cannot be written are counted and do not stop training;
// once the storage is usable again the next interval writes one.
TEST(LearnerCoreTest, FailedCheckpointsAreCountedAndRetriedAtTheNextInterval) {
  const std::string dir = MakeTestDir();
  BlockCheckpoints(dir);
  LearnerOptions options;
  options.spec = Spec("checkpoint_interval: 1");
  options.run_id = "t";
  options.run_dir = dir;
  options.max_checkpoint_failures = 3;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  for (int64_t v = 1; v <= 2; ++v) {
    ASSERT_OK(core->SubmitSegment(stream, Segment(0, v, v)));
    ASSERT_TRUE(
        WaitFor([&] { return core->fault_counts().checkpoint_failures >= v; },
                absl::Seconds(60)));
  }
  EXPECT_EQ(core->fault_counts().consecutive_checkpoint_failures, 2);
  EXPECT_EQ(core->fault_counts().checkpoints_written, 0);
  EXPECT_EQ(core->GetStatus().updates(), 2);
  EXPECT_FALSE(core->WaitUntilDone(absl::ZeroDuration()));  // still training

  std::filesystem::remove(std::filesystem::path(dir) / "checkpoints");
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 3, 3)));
  ASSERT_TRUE(
      WaitFor([&] { return core->fault_counts().checkpoints_written >= 1; },
              absl::Seconds(60)));
  const LearnerFaultCounts faults = core->fault_counts();
  EXPECT_EQ(faults.checkpoint_failures, 2);
  EXPECT_EQ(faults.consecutive_checkpoint_failures, 0);
  ASSERT_OK_AND_ASSIGN(const std::string latest,
                       LatestCheckpoint(dir + "/checkpoints"));
  EXPECT_THAT(latest, HasSubstr("ckpt-000000000003"));
  EXPECT_FALSE(core->WaitUntilDone(absl::ZeroDuration()));
}

// max_checkpoint_failures failures in a row fail the run with the storage
// error's code and message; the policies trained meanwhile were published.
TEST(LearnerCoreTest, CheckpointsFailingTooOftenInARowFailTheRun) {
  const std::string dir = MakeTestDir();
  BlockCheckpoints(dir);
  LearnerOptions options;
  options.spec = Spec("checkpoint_interval: 1");
  options.run_id = "t";
  options.run_dir = dir;
  options.max_checkpoint_failures = 3;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  for (int64_t v = 1; v <= 3; ++v) {
    ASSERT_OK(core->SubmitSegment(stream, Segment(0, v, v)));
    ASSERT_TRUE(WaitForVersion(*core, v + 1));
  }
  ASSERT_TRUE(core->WaitUntilDone(absl::Seconds(60)));
  EXPECT_THAT(core->final_status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("3 checkpoints in a row failed"),
                             HasSubstr("max_checkpoint_failures"),
                             HasSubstr("there is no complete checkpoint"),
                             HasSubstr("Not a directory"))));
  EXPECT_EQ(core->fault_counts().checkpoint_failures, 3);
  EXPECT_EQ(core->LatestPolicy()->version(), 4);
}

// The final checkpoint has no later interval to retry at: its failure is
// the run's, after the final policy was published.
TEST(LearnerCoreTest, AFailedFinalCheckpointFailsTheRun) {
  const std::string dir = MakeTestDir();
  BlockCheckpoints(dir);
  LearnerOptions options;
  options.spec = Spec("", /*total_env_steps=*/8);
  options.run_id = "t";
  options.run_dir = dir;
  ASSERT_OK_AND_ASSIGN(auto core, LearnerCore::Create(options));
  AckLog acks;
  const int64_t stream = core->OpenStream(0, acks.Callback());
  ASSERT_OK(core->SubmitSegment(stream, Segment(0, 1, 1)));
  ASSERT_TRUE(core->WaitUntilDone(absl::Seconds(60)));
  EXPECT_THAT(core->final_status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the final checkpoint failed")));
  EXPECT_TRUE(core->LatestPolicy()->final());
}

}  // namespace
}  // namespace rl
