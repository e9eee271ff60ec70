// LearnerCore's training and publishing (learner_core.cc): SYNC updates
// once every connected actor contributed, each actor's episodes kept
// apart, a league's segments and games, several policies each trained on
// its agents' rows, subscribers, a gang training alike (and failing when
// its ranks diverge), a CUDA run, and --profile. Segment intake is
// learner_core_intake_test.cc; checkpoints, resumes and faults
// learner_core_recovery_test.cc; the helpers learner_core_test_util.h.
#include "learner/learner_core.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/c10d_collective.h"
#include "learner/checkpoint.h"
#include "learner/learner_core_test_util.h"
#include "policy/actor_critic.h"
#include "policy/compute_device.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"
#include "proto/common.pb.h"
#include "proto/learner.pb.h"
#include "proto/telemetry.pb.h"
#include "telemetry/client/emitter.h"
#include "telemetry/client/recording_transport.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// CudaRuntimeFirst (learner_core_test_util.h) before any test.
const auto* const kCudaRuntimeFirst =
    ::testing::AddGlobalTestEnvironment(new CudaRuntimeFirst);

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

}  // namespace
}  // namespace rl
