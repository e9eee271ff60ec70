#include "coordinator/scheduler.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : scheduler_([this] { return now_; }, absl::Seconds(10)) {}

  RunSpec Spec(int learners, int actors, int min_actors = 0, int priority = 0,
               const std::string& learner_device = "cpu") {
    RunSpec spec;
    spec.set_priority(priority);
    spec.mutable_resources()->set_num_learners(learners);
    spec.mutable_resources()->set_num_actors(actors);
    spec.mutable_resources()->set_min_actors(min_actors);
    spec.mutable_resources()->set_learner_device(learner_device);
    spec.mutable_resources()->set_actor_device("cpu");
    return spec;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  Scheduler scheduler_;
};

TEST_F(SchedulerTest, GangPlacementWaitsForLearnersAndMinActors) {
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Enqueue("run-1", Spec(1, 2, 1), 1);
  EXPECT_TRUE(scheduler_.Place().empty());  // no learner yet
  scheduler_.Register("l0", LEARNER, {}, "127.0.0.1:1");
  const auto placements = scheduler_.Place();
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].learners, std::vector<std::string>{"l0"});
  EXPECT_EQ(placements[0].actors, std::vector<std::string>{"a0"});
  EXPECT_EQ(scheduler_.worker("a0")->run_id, "run-1");
  // A second actor arrives: the run gets it up to num_actors.
  scheduler_.Register("a1", ACTOR, {}, "");
  const auto added = scheduler_.TopUpActors();
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], std::make_pair(std::string("run-1"), std::string("a1")));
  EXPECT_EQ(scheduler_.worker("a1")->rank, 1);
}

// resources.learner_per_policy: a learner for each policy of the block,
// ranks in the block's order (rank 0 the first's, which the actors reach).
TEST_F(SchedulerTest, ALearnerPerPolicyWaitsForOneLearnerEach) {
  RunSpec spec = Spec(1, 1);
  spec.mutable_resources()->set_learner_per_policy(true);
  for (const char* name : {"red", "blue", "green"}) {
    spec.add_policies()->set_name(name);
  }
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Register("l0", LEARNER, {}, "127.0.0.1:1");
  scheduler_.Register("l1", LEARNER, {}, "127.0.0.1:2");
  scheduler_.Enqueue("three", spec, 1);
  EXPECT_TRUE(scheduler_.Place().empty());
  EXPECT_NE(scheduler_.WhyWaiting("three").find("needs 3 learners"),
            std::string::npos)
      << scheduler_.WhyWaiting("three");
  scheduler_.Register("l2", LEARNER, {}, "127.0.0.1:3");
  const auto placements = scheduler_.Place();
  ASSERT_EQ(placements.size(), 1u);
  ASSERT_EQ(placements[0].learners.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(scheduler_.worker(placements[0].learners[rank])->rank, rank);
  }
  // Gangs of two per policy: 2 x 2 learners.
  RunSpec gangs = Spec(2, 1);
  gangs.mutable_resources()->set_learner_per_policy(true);
  gangs.add_policies()->set_name("red");
  gangs.add_policies()->set_name("blue");
  scheduler_.Register("a1", ACTOR, {}, "");
  for (const char* name : {"l3", "l4", "l5"}) {
    scheduler_.Register(name, LEARNER, {}, "127.0.0.1:4");
  }
  scheduler_.Enqueue("gangs", gangs, 2);
  EXPECT_TRUE(scheduler_.Place().empty());
  EXPECT_NE(scheduler_.WhyWaiting("gangs").find("needs 4 learners"),
            std::string::npos)
      << scheduler_.WhyWaiting("gangs");
  scheduler_.Register("l6", LEARNER, {}, "127.0.0.1:5");
  const auto gang_placements = scheduler_.Place();
  ASSERT_EQ(gang_placements.size(), 1u);
  EXPECT_EQ(gang_placements[0].learners.size(), 4u);
}

TEST_F(SchedulerTest, DeviceFit) {
  scheduler_.Register("cpu-learner", LEARNER, {}, "");
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Enqueue("gpu-run", Spec(1, 1, 1, 0, "cuda"), 1);
  EXPECT_TRUE(scheduler_.Place().empty());
  scheduler_.Register("gpu-learner", LEARNER, {"cuda:0"}, "");
  const auto placements = scheduler_.Place();
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].learners, std::vector<std::string>{"gpu-learner"});
}

TEST_F(SchedulerTest, PriorityFirstThenSubmissionOrderAndSmallerRunsFit) {
  scheduler_.Register("l0", LEARNER, {}, "");
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Enqueue("big", Spec(2, 1), 1);  // cannot fit: one learner
  scheduler_.Enqueue("low", Spec(1, 1), 2);
  scheduler_.Enqueue("high", Spec(1, 1, 0, 5), 3);
  const auto placements = scheduler_.Place();
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].run_id, "high");
  EXPECT_TRUE(scheduler_.queued("big"));
  EXPECT_TRUE(scheduler_.queued("low"));
}

TEST_F(SchedulerTest, TwoRunsShareThePool) {
  for (const char* id : {"l0", "l1"}) scheduler_.Register(id, LEARNER, {}, "");
  for (const char* id : {"a0", "a1"}) scheduler_.Register(id, ACTOR, {}, "");
  scheduler_.Enqueue("r1", Spec(1, 1), 1);
  scheduler_.Enqueue("r2", Spec(1, 1), 2);
  EXPECT_EQ(scheduler_.Place().size(), 2u);
}

TEST(WorkerNameLessTest, CountsNumbersAsNumbers) {
  const WorkerNameLess less;
  EXPECT_TRUE(less("local-learner-2", "local-learner-10"));
  EXPECT_FALSE(less("local-learner-10", "local-learner-2"));
  EXPECT_TRUE(less("local-actor-9", "local-learner-0"));  // text first
  EXPECT_TRUE(less("gpu1-learner-3", "gpu2-learner-0"));
  EXPECT_TRUE(less("node", "node-1"));  // a prefix first
  EXPECT_FALSE(less("node-1", "node"));
  // Equal as numbers, yet two names: a strict order between them.
  EXPECT_NE(less("w7", "w07"), less("w07", "w7"));
  EXPECT_FALSE(less("w7", "w7"));
}

TEST_F(SchedulerTest, RanksFollowTheWorkersNumbers) {
  // Registered in no order; a map by plain text would put local-learner-10
  // and -11 before -2, and rank r would not sit on local-learner-r (the
  // worker the local pool gives GPU r mod G).
  for (int i : {7, 11, 0, 10, 3, 1, 9, 2, 5, 8, 4, 6}) {
    scheduler_.Register(absl::StrCat("local-learner-", i), LEARNER, {}, "");
  }
  scheduler_.Register("local-actor-0", ACTOR, {}, "");
  scheduler_.Enqueue("r1", Spec(12, 1), 1);
  const std::vector<Placement> placed = scheduler_.Place();
  ASSERT_EQ(placed.size(), 1u);
  ASSERT_EQ(placed[0].learners.size(), 12u);
  for (int r = 0; r < 12; ++r) {
    EXPECT_EQ(placed[0].learners[r], absl::StrCat("local-learner-", r));
  }
}

TEST_F(SchedulerTest, LeasesExpireAndFreeTheRunForRescheduling) {
  const Lease lease = scheduler_.Register("l0", LEARNER, {}, "");
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Enqueue("r1", Spec(1, 1), 1);
  ASSERT_EQ(scheduler_.Place().size(), 1u);
  now_ += absl::Seconds(8);
  ASSERT_OK(scheduler_.Heartbeat("a0", scheduler_.worker("a0")->epoch));
  EXPECT_TRUE(scheduler_.ExpireLeases().empty());
  now_ += absl::Seconds(5);  // l0 missed its lease (13 s > 10 s); a0 did not.
  const auto lost = scheduler_.ExpireLeases();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].worker_id, "l0");
  EXPECT_EQ(lost[0].run_id, "r1");
  EXPECT_THAT(scheduler_.Heartbeat("l0", lease.epoch()),
              StatusIs(absl::StatusCode::kNotFound));
  // The coordinator requeues the run: its actor is freed, and a new learner
  // takes it.
  scheduler_.Enqueue("r1", Spec(1, 1), 1);
  EXPECT_EQ(scheduler_.worker("a0")->run_id, "");
  scheduler_.Register("l1", LEARNER, {}, "");
  const auto placements = scheduler_.Place();
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].learners, std::vector<std::string>{"l1"});
}

TEST_F(SchedulerTest, StaleEpochAndExpiredLeaseAreRejected) {
  const Lease first = scheduler_.Register("a0", ACTOR, {}, "");
  const Lease second = scheduler_.Register("a0", ACTOR, {}, "");
  EXPECT_GT(second.epoch(), first.epoch());
  EXPECT_THAT(scheduler_.Heartbeat("a0", first.epoch()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  now_ += absl::Seconds(11);
  EXPECT_THAT(scheduler_.Heartbeat("a0", second.epoch()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(SchedulerTest, CancelFreesWorkers) {
  scheduler_.Register("l0", LEARNER, {}, "");
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Enqueue("r1", Spec(1, 1), 1);
  scheduler_.Enqueue("r2", Spec(1, 1), 2);
  ASSERT_EQ(scheduler_.Place().size(), 1u);
  const auto freed = scheduler_.Release("r1");
  EXPECT_EQ(freed.size(), 2u);
  const auto placements = scheduler_.Place();
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].run_id, "r2");
  scheduler_.Release("r2");
  EXPECT_FALSE(scheduler_.queued("r2"));
}

TEST_F(SchedulerTest, WorkersKeepTheirRunAcrossACoordinatorRestart) {
  // A fresh scheduler (after restart) knows r1 was RUNNING.
  scheduler_.MarkPlaced("r1", Spec(1, 1));
  scheduler_.Register("l0", LEARNER, {}, "", "r1", 0);
  scheduler_.Register("a0", ACTOR, {}, "", "gone-run", 0);
  EXPECT_EQ(scheduler_.worker("l0")->run_id, "r1");
  EXPECT_EQ(scheduler_.worker("a0")->run_id, "");  // unknown run: idle
  const auto added = scheduler_.TopUpActors();
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].second, "a0");
}

TEST_F(SchedulerTest, FootprintIsEstimatedOncePerRunNotOnEveryTopUp) {
  int estimates = 0;
  Scheduler scheduler([this] { return now_; }, absl::Seconds(10),
                      [&estimates](const RunSpec&) {
                        ++estimates;
                        RunFootprint footprint;
                        footprint.learner_bytes = 1000;
                        footprint.actor_bytes = 1000;
                        return footprint;
                      });
  scheduler.Register("l0", LEARNER, {}, "");
  scheduler.Register("a0", ACTOR, {}, "");
  scheduler.Enqueue("r1", Spec(1, 3, 1), 1);
  ASSERT_EQ(scheduler.Place().size(), 1u);
  // The coordinator tops up actors on every tick.
  for (int tick = 0; tick < 100; ++tick) {
    EXPECT_TRUE(scheduler.TopUpActors().empty());
  }
  // The kept footprint still decides which actors fit.
  scheduler.Register("small", ACTOR, {}, "");
  scheduler.SetMemory("small", 999);
  EXPECT_TRUE(scheduler.TopUpActors().empty());
  scheduler.Register("large", ACTOR, {}, "");
  scheduler.SetMemory("large", 1000);
  const auto added = scheduler.TopUpActors();
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].second, "large");
  // Sent back to the queue (a gang restart) and placed again.
  scheduler.Enqueue("r1", Spec(1, 3, 1), 2);
  ASSERT_EQ(scheduler.Place().size(), 1u);
  EXPECT_EQ(estimates, 1);
  // A run recovered after a coordinator restart: estimated once, at load.
  scheduler.MarkPlaced("r2", Spec(1, 1));
  scheduler.Register("l1", LEARNER, {}, "", "r2", 0);
  for (int tick = 0; tick < 100; ++tick) scheduler.TopUpActors();
  EXPECT_EQ(estimates, 2);
}

// After a coordinator restart, actors join a run only once every rank of
// its gang is back: they pick their learner by index among the gang's
// addresses, and a rank that is not back yet would shift them.
TEST_F(SchedulerTest, ActorsWaitForTheWholeGangAfterARestart) {
  scheduler_.MarkPlaced("r", Spec(2, 1));
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Register("l1", LEARNER, {}, "", "r", 1);
  EXPECT_TRUE(scheduler_.TopUpActors().empty());
  scheduler_.Register("l0", LEARNER, {}, "", "r", 0);
  const auto added = scheduler_.TopUpActors();
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], std::make_pair(std::string("r"), std::string("a0")));
  // A learner per policy: rank 1 trains a policy of its own and takes no
  // stream; rank 0 is the gang.
  RunSpec per_policy = Spec(1, 1);
  per_policy.mutable_resources()->set_learner_per_policy(true);
  per_policy.add_policies()->set_name("red");
  per_policy.add_policies()->set_name("blue");
  scheduler_.MarkPlaced("p", per_policy);
  scheduler_.Register("a1", ACTOR, {}, "");
  scheduler_.Register("l3", LEARNER, {}, "", "p", 1);
  EXPECT_TRUE(scheduler_.TopUpActors().empty());
  scheduler_.Register("l2", LEARNER, {}, "", "p", 0);
  ASSERT_EQ(scheduler_.TopUpActors().size(), 1u);
  // A gang of two per policy: ranks 0-1 are the run's gang (the streams'),
  // 2-3 blue's; the actors wait for ranks 0 and 1 only.
  RunSpec gangs = Spec(2, 1);
  gangs.mutable_resources()->set_learner_per_policy(true);
  gangs.add_policies()->set_name("red");
  gangs.add_policies()->set_name("blue");
  scheduler_.MarkPlaced("g", gangs);
  scheduler_.Register("a2", ACTOR, {}, "");
  scheduler_.Register("l4", LEARNER, {}, "", "g", 0);
  EXPECT_TRUE(scheduler_.TopUpActors().empty());
  scheduler_.Register("l5", LEARNER, {}, "", "g", 1);
  ASSERT_EQ(scheduler_.TopUpActors().size(), 1u);
}

TEST_F(SchedulerTest, SaysWhyARunWaits) {
  scheduler_.Register("l0", LEARNER, {}, "127.0.0.1:1");
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Enqueue("big", Spec(2, 3), 1);
  scheduler_.Enqueue("gpu", Spec(1, 1, 0, 0, "cuda"), 2);
  EXPECT_TRUE(scheduler_.Place().empty());
  EXPECT_EQ(scheduler_.WhyWaiting("big"),
            "needs 2 learners (cpu): 1 idle of 1 registered; "
            "needs 3 actors (cpu): 1 idle of 1 registered");
  EXPECT_EQ(scheduler_.WhyWaiting("gpu"),
            "needs 1 learners with cuda: 0 of 1 registered have it");
  EXPECT_EQ(scheduler_.WhyWaiting("unknown"), "");
  // A run that fits has no reason (it is placed at the next Place).
  scheduler_.Enqueue("small", Spec(1, 1), 3);
  EXPECT_EQ(scheduler_.WhyWaiting("small"), "");
}

TEST_F(SchedulerTest, MemoryFitAndRunsThatCouldNeverBePlaced) {
  RunSpec big = Spec(1, 1, 1);
  big.set_envs_per_actor(4096);
  big.set_segment_length(1024);
  big.mutable_env()->set_observation_size(4);
  big.mutable_env()->set_num_discrete_actions(2);
  scheduler_.Register("l0", LEARNER, {}, "");
  scheduler_.SetMemory("l0", 16 << 20);
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.SetMemory("a0", 16 << 20);
  scheduler_.Enqueue("big", big, 1);
  scheduler_.Enqueue("small", Spec(1, 1, 1), 2);
  const auto placed = scheduler_.Place();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].run_id, "small");  // not blocked behind "big"
  EXPECT_FALSE(scheduler_.CouldEverPlace("big"));
  EXPECT_EQ(scheduler_.QueuedRuns(), std::vector<std::string>{"big"});
  EXPECT_NE(scheduler_.WhyWaiting("big").find(
                "of memory each: 0 of 1 registered have enough (the largest "
                "has 16 MiB)"),
            std::string::npos)
      << scheduler_.WhyWaiting("big");
  // A worker of unknown memory (0) may take it.
  scheduler_.Register("l1", LEARNER, {}, "");
  scheduler_.Register("a1", ACTOR, {}, "");
  EXPECT_TRUE(scheduler_.CouldEverPlace("big"));
  ASSERT_EQ(scheduler_.Place().size(), 1u);
  EXPECT_EQ(scheduler_.worker("l1")->run_id, "big");
}

TEST_F(SchedulerTest, BusyIsNotNever) {
  scheduler_.Register("l0", LEARNER, {}, "");
  scheduler_.Register("a0", ACTOR, {}, "");
  scheduler_.Enqueue("first", Spec(1, 1, 1), 1);
  scheduler_.Enqueue("second", Spec(1, 1, 1), 2);
  ASSERT_EQ(scheduler_.Place().size(), 1u);
  EXPECT_TRUE(scheduler_.CouldEverPlace("second"));
  scheduler_.Enqueue("two-learners", Spec(2, 1, 1), 3);
  EXPECT_FALSE(scheduler_.CouldEverPlace("two-learners"));
  // A failed actor is freed from its run, which tops it up again.
  scheduler_.ReleaseWorker("a0");
  EXPECT_EQ(scheduler_.worker("a0")->run_id, "");
  ASSERT_EQ(scheduler_.TopUpActors().size(), 1u);
  EXPECT_EQ(scheduler_.worker("a0")->run_id, "first");
}

}  // namespace
}  // namespace rl
