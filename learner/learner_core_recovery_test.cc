// LearnerCore's checkpoints, resumes and faults (learner_core.cc,
// learner_core_state.cc): a checkpoint at stop, a round started from
// another run's checkpoint, one from before TrainingState, resent segments
// not used twice by a resumed learner or gang, a gang whose rank 0 cannot
// start, non-finite weights and updates, and checkpoints that cannot be
// written. Helpers: learner_core_test_util.h.
#include <torch/utils.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/c10d_collective.h"
#include "learner/checkpoint.h"
#include "learner/collective.h"
#include "learner/learner_core.h"
#include "learner/learner_core_test_util.h"
#include "learner/segment_ledger.h"
#include "policy/actor_critic.h"
#include "proto/common.pb.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// CudaRuntimeFirst (learner_core_test_util.h) before any test.
const auto* const kCudaRuntimeFirst =
    ::testing::AddGlobalTestEnvironment(new CudaRuntimeFirst);

// Finite (float's maximum is 3.4e38), but the value loss overflows.
// Finite but huge: a value estimate no network of the run could give.
constexpr float kHugeValue = 3e38f;

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
