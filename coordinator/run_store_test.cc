#include "coordinator/run_store.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <set>

#include "gtest/gtest.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

std::string DbPath(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return (dir / "coordinator.db").string();
}

RunSpec Spec(const std::string& name) {
  RunSpec spec;
  spec.set_name(name);
  spec.mutable_env()->set_id("CartPole-v1");
  return spec;
}

TEST(RunStoreTest, SubmitGetAndIdempotency) {
  auto store = RunStore::Open(DbPath("submit"));
  ASSERT_TRUE(store.ok()) << store.status();
  bool created = false;
  auto a = (*store)->SubmitRun(Spec("a"), "key-1", &created);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(created);
  EXPECT_EQ(a->state(), QUEUED);
  EXPECT_EQ(a->spec().name(), "a");
  auto again = (*store)->SubmitRun(Spec("a"), "key-1", &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(again->run_id(), a->run_id());
  auto b = (*store)->SubmitRun(Spec("b"), "", &created);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(b->run_id(), a->run_id());
  EXPECT_EQ((*store)->GetRun(a->run_id())->spec().name(), "a");
  EXPECT_EQ((*store)->GetRun("run-999999").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RunStoreTest, ListsNewestFirstWithFiltersAndPages) {
  auto store = RunStore::Open(DbPath("list"));
  ASSERT_TRUE(store.ok());
  bool created;
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    ids.push_back((*store)->SubmitRun(Spec("r"), "", &created)->run_id());
  }
  ASSERT_TRUE((*store)->Transition(ids[2], CANCELLED, "user").ok());
  std::string token;
  std::vector<std::string> seen;
  do {
    auto page = (*store)->ListRuns({}, 3, token, &token);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->size(), 3u);
    for (const rl::Run& r : *page) seen.push_back(r.run_id());
  } while (!token.empty());
  EXPECT_EQ(seen, std::vector<std::string>(ids.rbegin(), ids.rend()));

  std::string unused;
  auto cancelled = (*store)->ListRuns({CANCELLED}, 10, "", &unused);
  ASSERT_EQ(cancelled->size(), 1u);
  EXPECT_EQ((*cancelled)[0].run_id(), ids[2]);
  EXPECT_EQ((*store)->ListRuns({}, 10, "garbage", &unused).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RunStoreTest, LifecycleIsEnforcedAndLogged) {
  auto store = RunStore::Open(DbPath("lifecycle"));
  ASSERT_TRUE(store.ok());
  bool created;
  const std::string id = (*store)->SubmitRun(Spec("r"), "", &created)->run_id();
  EXPECT_EQ((*store)->Transition(id, RUNNING, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*store)->Transition(id, PLACING, "workers found").ok());
  ASSERT_TRUE((*store)->Transition(id, RUNNING, "started").ok());
  ASSERT_TRUE((*store)->Transition(id, PLACING, "learner lost").ok());
  ASSERT_TRUE((*store)->Transition(id, RUNNING, "resumed").ok());
  auto done = (*store)->Transition(id, FAILED, "diverged");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->failure_reason(), "diverged");
  EXPECT_EQ(done->generation(), 6);
  EXPECT_EQ((*store)->Transition(id, CANCELLED, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto events = (*store)->Events(id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 6u);
  EXPECT_EQ(events->front().to, QUEUED);
  EXPECT_EQ(events->back().to, FAILED);
  EXPECT_EQ(events->back().reason, "diverged");
}

TEST(RunStoreTest, StateSurvivesReopen) {
  const std::string path = DbPath("reopen");
  std::string id;
  {
    auto store = RunStore::Open(path);
    ASSERT_TRUE(store.ok());
    bool created;
    id = (*store)->SubmitRun(Spec("r"), "k", &created)->run_id();
    RunProgress progress;
    progress.set_env_steps(1234);
    ASSERT_TRUE((*store)->UpdateProgress(id, progress).ok());
    ASSERT_TRUE((*store)->Transition(id, PLACING, "").ok());
  }
  auto store = RunStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto run = (*store)->GetRun(id);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->state(), PLACING);
  EXPECT_EQ(run->progress().env_steps(), 1234);
  bool created;
  EXPECT_EQ((*store)->SubmitRun(Spec("r"), "k", &created)->run_id(), id);
  EXPECT_FALSE(created);
}

TEST(RunStoreTest, WorkersAndAssignmentsArePersisted) {
  const std::string path = DbPath("assignments");
  {
    auto store = RunStore::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->PutWorker("w1", LEARNER, "127.0.0.1:1").ok());
    AssignmentRecord a{"w1", "run-000001", LEARNER, 0, 42};
    ASSERT_TRUE((*store)->PutAssignment(a).ok());
    AssignmentRecord b{"w2", "run-000001", ACTOR, 1, 43};
    ASSERT_TRUE((*store)->PutAssignment(b).ok());
    ASSERT_TRUE((*store)->ClearAssignment("w2").ok());
  }
  auto store = RunStore::Open(path);
  auto all = (*store)->Assignments();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].worker_id, "w1");
  EXPECT_EQ((*all)[0].assignment_id, 42);
  EXPECT_EQ((*all)[0].role, LEARNER);
}

// A child process submits and transitions runs as fast as it can and is
// SIGKILLed at a random moment, five times over. Every run found afterwards
// is consistent with its event log, and ids are never duplicated.
TEST(RunStoreTest, SurvivesSigkillDuringAStorm) {
  const std::string path = DbPath("storm");
  std::mt19937 rng(1);
  for (int round = 0; round < 5; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto store = RunStore::Open(path);
      if (!store.ok()) _exit(2);
      bool created;
      for (int i = 0;; ++i) {
        auto run = (*store)->SubmitRun(Spec("s"), "", &created);
        if (!run.ok()) _exit(3);
        (*store)->Transition(run->run_id(), PLACING, "").IgnoreError();
        (*store)->Transition(run->run_id(), RUNNING, "").IgnoreError();
      }
    }
    usleep(std::uniform_int_distribution<int>(20000, 120000)(rng));
    kill(child, SIGKILL);
    int status;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
  }
  auto store = RunStore::Open(path);
  ASSERT_TRUE(store.ok());
  std::string token, unused;
  std::set<std::string> ids;
  int runs = 0;
  do {
    auto page = (*store)->ListRuns({}, 500, token, &token);
    ASSERT_TRUE(page.ok());
    for (const rl::Run& run : *page) {
      ++runs;
      EXPECT_TRUE(ids.insert(run.run_id()).second) << run.run_id();
      auto events = (*store)->Events(run.run_id());
      ASSERT_TRUE(events.ok());
      ASSERT_FALSE(events->empty());
      EXPECT_EQ(events->back().to, run.state()) << run.run_id();
      EXPECT_EQ(static_cast<int64_t>(events->size()), run.generation());
    }
  } while (!token.empty());
  EXPECT_GT(runs, 5);
}

}  // namespace
}  // namespace rl
