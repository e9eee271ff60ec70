#include "coordinator/run_store.h"

#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

std::string DbPath(const std::string& name) {
  return MakeTestDir(name) + "/coordinator.db";
}

// Reads `n` bytes from `fd`; false if the writer is gone or `timeout`
// passes first.
bool ReadBytes(int fd, int n, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  char buffer[256];
  while (n > 0) {
    pollfd p{fd, POLLIN, 0};
    const int ms =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms <= 0 || poll(&p, 1, ms) != 1) return false;
    const ssize_t r =
        read(fd, buffer, std::min<int>(n, static_cast<int>(sizeof(buffer))));
    if (r <= 0) return false;
    n -= static_cast<int>(r);
  }
  return true;
}

RunSpec Spec(const std::string& name) {
  RunSpec spec;
  spec.set_name(name);
  spec.mutable_env()->set_id("CartPole-v1");
  return spec;
}

TEST(RunStoreTest, SubmitGetAndIdempotency) {
  auto store = RunStore::Open(DbPath("submit"));
  ASSERT_OK(store);
  bool created = false;
  auto a = (*store)->SubmitRun(Spec("a"), "key-1", &created);
  ASSERT_OK(a);
  EXPECT_TRUE(created);
  EXPECT_EQ(a->state(), QUEUED);
  EXPECT_EQ(a->spec().name(), "a");
  auto again = (*store)->SubmitRun(Spec("a"), "key-1", &created);
  ASSERT_OK(again);
  EXPECT_FALSE(created);
  EXPECT_EQ(again->run_id(), a->run_id());
  auto b = (*store)->SubmitRun(Spec("b"), "", &created);
  ASSERT_OK(b);
  EXPECT_NE(b->run_id(), a->run_id());
  EXPECT_EQ((*store)->GetRun(a->run_id())->spec().name(), "a");
  EXPECT_THAT((*store)->GetRun("run-999999"),
              StatusIs(absl::StatusCode::kNotFound));
}

// Idempotency keys are per owner: a sweep's trial keys ("<sweep id>/<i>")
// can be guessed, and another owner's run with the same key must not be
// handed back (a sweep would adopt and later cancel it).
TEST(RunStoreTest, IdempotencyKeysArePerOwner) {
  auto store = RunStore::Open(DbPath("keys_per_owner"));
  ASSERT_OK(store);
  bool created = false;
  ASSERT_OK_AND_ASSIGN(
      const rl::Run bobs,
      (*store)->SubmitRun(Spec("b"), "sweep-000001/1", &created, "bob"));
  EXPECT_TRUE(created);
  ASSERT_OK_AND_ASSIGN(
      const rl::Run alices,
      (*store)->SubmitRun(Spec("a"), "sweep-000001/1", &created, "alice"));
  EXPECT_TRUE(created);
  EXPECT_NE(alices.run_id(), bobs.run_id());
  EXPECT_EQ(alices.owner(), "alice");
  EXPECT_EQ(alices.spec().name(), "a");
  ASSERT_OK_AND_ASSIGN(
      const rl::Run again,
      (*store)->SubmitRun(Spec("a"), "sweep-000001/1", &created, "alice"));
  EXPECT_FALSE(created);
  EXPECT_EQ(again.run_id(), alices.run_id());
  // Owners and keys that spell the same text together stay apart.
  ASSERT_OK_AND_ASSIGN(const rl::Run ab,
                       (*store)->SubmitRun(Spec("x"), "b/k", &created, "a"));
  ASSERT_OK_AND_ASSIGN(const rl::Run a_b,
                       (*store)->SubmitRun(Spec("y"), "k", &created, "a/b"));
  EXPECT_TRUE(created);
  EXPECT_NE(ab.run_id(), a_b.run_id());
  // Sweeps' keys too.
  Sweep sweep;
  sweep.set_owner("bob");
  ASSERT_OK_AND_ASSIGN(const Sweep bobs_sweep,
                       (*store)->CreateSweep(sweep, "s", &created));
  sweep.set_owner("alice");
  ASSERT_OK_AND_ASSIGN(const Sweep alices_sweep,
                       (*store)->CreateSweep(sweep, "s", &created));
  EXPECT_TRUE(created);
  EXPECT_NE(alices_sweep.sweep_id(), bobs_sweep.sweep_id());
  EXPECT_EQ((*store)->FindSweepByKey("s", "bob")->sweep_id(),
            bobs_sweep.sweep_id());
  EXPECT_THAT((*store)->FindSweepByKey("s", "carol"),
              StatusIs(absl::StatusCode::kNotFound));
}

// Keys stored bare (before they were per owner) stay their owner's: a
// retry from the owner gets its run, anyone else a run of their own.
TEST(RunStoreTest, KeysStoredBeforeTheyWerePerOwnerStayTheOwners) {
  const std::string path = DbPath("bare_keys");
  std::string run_id, sweep_id;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunStore> store, RunStore::Open(path));
    bool created;
    ASSERT_OK_AND_ASSIGN(const rl::Run run,
                         store->SubmitRun(Spec("old"), "", &created, "alice"));
    run_id = run.run_id();
    Sweep sweep;
    sweep.set_owner("alice");
    ASSERT_OK_AND_ASSIGN(const Sweep made,
                         store->CreateSweep(sweep, "", &created));
    sweep_id = made.sweep_id();
  }
  // As a coordinator before them wrote the file.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE runs SET idempotency_key = 'k'; UPDATE "
                         "sweeps SET idempotency_key = 'k'; PRAGMA "
                         "user_version = 0;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunStore> store, RunStore::Open(path));
  bool created = true;
  ASSERT_OK_AND_ASSIGN(const rl::Run same,
                       store->SubmitRun(Spec("old"), "k", &created, "alice"));
  EXPECT_FALSE(created);
  EXPECT_EQ(same.run_id(), run_id);
  ASSERT_OK_AND_ASSIGN(const rl::Run other,
                       store->SubmitRun(Spec("new"), "k", &created, "bob"));
  EXPECT_TRUE(created);
  EXPECT_NE(other.run_id(), run_id);
  EXPECT_EQ(store->FindSweepByKey("k", "alice")->sweep_id(), sweep_id);
  EXPECT_THAT(store->FindSweepByKey("k", "bob"),
              StatusIs(absl::StatusCode::kNotFound));
  // Scoped once: opening the file again changes nothing.
  store.reset();
  ASSERT_OK_AND_ASSIGN(store, RunStore::Open(path));
  EXPECT_EQ(store->SubmitRun(Spec("old"), "k", &created, "alice")->run_id(),
            run_id);
  EXPECT_FALSE(created);
}

TEST(RunStoreTest, ListsNewestFirstWithFiltersAndPages) {
  auto store = RunStore::Open(DbPath("list"));
  ASSERT_OK(store);
  bool created;
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    ids.push_back((*store)->SubmitRun(Spec("r"), "", &created)->run_id());
  }
  ASSERT_OK((*store)->Transition(ids[2], CANCELLED, "user"));
  std::string token;
  std::vector<std::string> seen;
  do {
    auto page = (*store)->ListRuns({}, 3, token, &token);
    ASSERT_OK(page);
    EXPECT_LE(page->size(), 3u);
    for (const rl::Run& r : *page) seen.push_back(r.run_id());
  } while (!token.empty());
  EXPECT_EQ(seen, std::vector<std::string>(ids.rbegin(), ids.rend()));

  std::string unused;
  auto cancelled = (*store)->ListRuns({CANCELLED}, 10, "", &unused);
  ASSERT_EQ(cancelled->size(), 1u);
  EXPECT_EQ((*cancelled)[0].run_id(), ids[2]);
  EXPECT_THAT((*store)->ListRuns({}, 10, "garbage", &unused),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RunStoreTest, LifecycleIsEnforcedAndLogged) {
  auto store = RunStore::Open(DbPath("lifecycle"));
  ASSERT_OK(store);
  bool created;
  const std::string id = (*store)->SubmitRun(Spec("r"), "", &created)->run_id();
  EXPECT_THAT((*store)->Transition(id, RUNNING, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK((*store)->Transition(id, PLACING, "workers found"));
  ASSERT_OK((*store)->Transition(id, RUNNING, "started"));
  ASSERT_OK((*store)->Transition(id, PLACING, "learner lost"));
  ASSERT_OK((*store)->Transition(id, RUNNING, "resumed"));
  auto done = (*store)->Transition(id, FAILED, "diverged");
  ASSERT_OK(done);
  EXPECT_EQ(done->failure_reason(), "diverged");
  EXPECT_EQ(done->generation(), 6);
  EXPECT_THAT((*store)->Transition(id, CANCELLED, ""),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  auto events = (*store)->Events(id);
  ASSERT_OK(events);
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
    ASSERT_OK(store);
    bool created;
    id = (*store)->SubmitRun(Spec("r"), "k", &created)->run_id();
    RunProgress progress;
    progress.set_env_steps(1234);
    ASSERT_OK((*store)->UpdateProgress(id, progress));
    ASSERT_OK((*store)->Transition(id, PLACING, ""));
  }
  auto store = RunStore::Open(path);
  ASSERT_OK(store);
  auto run = (*store)->GetRun(id);
  ASSERT_OK(run);
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
    ASSERT_OK(store);
    ASSERT_OK((*store)->PutWorker("w1", LEARNER, "127.0.0.1:1"));
    AssignmentRecord a{"w1", "run-000001", LEARNER, 0, 42};
    ASSERT_OK((*store)->PutAssignment(a));
    AssignmentRecord b{"w2", "run-000001", ACTOR, 1, 43};
    ASSERT_OK((*store)->PutAssignment(b));
    ASSERT_OK((*store)->ClearAssignment("w2"));
  }
  auto store = RunStore::Open(path);
  auto all = (*store)->Assignments();
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].worker_id, "w1");
  EXPECT_EQ((*all)[0].assignment_id, 42);
  EXPECT_EQ((*all)[0].role, LEARNER);
}

// A child process submits and transitions runs as fast as it can and is
// SIGKILLed at a random moment (after a random number of its runs, 1 to
// 100, while it works on the next ones), five times over. Every run found
// afterwards is consistent with its event log, and ids are never
// duplicated.
TEST(RunStoreTest, SurvivesSigkillDuringAStorm) {
  const std::string path = DbPath("storm");
  std::mt19937 rng(1);
  for (int round = 0; round < 5; ++round) {
    int progress[2];
    ASSERT_EQ(pipe(progress), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(progress[0]);
      auto store = RunStore::Open(path);
      if (!store.ok()) _exit(2);
      bool created;
      for (int i = 0;; ++i) {
        auto run = (*store)->SubmitRun(Spec("s"), "", &created);
        if (!run.ok()) _exit(3);
        (*store)->Transition(run->run_id(), PLACING, "").IgnoreError();
        (*store)->Transition(run->run_id(), RUNNING, "").IgnoreError();
        // One byte per run; the pipe never fills before the kill (the
        // parent reads at most 100 of them).
        if (write(progress[1], "r", 1) != 1) _exit(4);
      }
    }
    close(progress[1]);
    const int runs_before_kill =
        std::uniform_int_distribution<int>(1, 100)(rng);
    const bool progressed =
        ReadBytes(progress[0], runs_before_kill, absl::Seconds(120));
    kill(child, SIGKILL);
    close(progress[0]);
    EXPECT_TRUE(progressed)
        << "the child stored fewer than " << runs_before_kill << " runs";
    int status;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
  }
  auto store = RunStore::Open(path);
  ASSERT_OK(store);
  std::string token, unused;
  std::set<std::string> ids;
  int runs = 0;
  do {
    auto page = (*store)->ListRuns({}, 500, token, &token);
    ASSERT_OK(page);
    for (const rl::Run& run : *page) {
      ++runs;
      EXPECT_TRUE(ids.insert(run.run_id()).second) << run.run_id();
      auto events = (*store)->Events(run.run_id());
      ASSERT_OK(events);
      ASSERT_FALSE(events->empty());
      EXPECT_EQ(events->back().to, run.state()) << run.run_id();
      EXPECT_EQ(static_cast<int64_t>(events->size()), run.generation());
    }
  } while (!token.empty());
  EXPECT_GT(runs, 5);
}

// A full store (capped here; a full disk gives SQLite the same SQLITE_FULL)
// fails the write clearly and keeps what was already stored.
TEST(RunStoreTest, AFullStoreIsResourceExhaustedAndLosesNothing) {
  const std::string path = DbPath("full");
  auto store = RunStore::Open(path, /*max_bytes=*/64 << 10);
  ASSERT_OK(store);
  RunSpec spec;
  spec.set_name(std::string(100, 'x'));
  spec.mutable_env()->set_id("CartPole-v1");
  std::vector<std::string> stored;
  absl::Status error;
  for (int i = 0; i < 10000 && error.ok(); ++i) {
    bool created = false;
    auto run = (*store)->SubmitRun(spec, "", &created);
    if (run.ok()) {
      stored.push_back(run->run_id());
    } else {
      error = run.status();
    }
  }
  ASSERT_FALSE(error.ok()) << "the cap never filled";
  EXPECT_EQ(error.code(), absl::StatusCode::kResourceExhausted) << error;
  EXPECT_NE(error.message().find(path), std::string::npos) << error;
  EXPECT_NE(error.message().find("free disk space"), std::string::npos);
  ASSERT_GT(stored.size(), 10u);
  for (const std::string& id : stored) {
    ASSERT_OK((*store)->GetRun(id)) << id;
  }
  // Reopened without the cap (space came back): writes work again.
  store->reset();
  store = RunStore::Open(path);
  ASSERT_OK(store);
  bool created = false;
  EXPECT_OK((*store)->SubmitRun(spec, "", &created));
  EXPECT_OK((*store)->GetRun(stored.back()));
}

// A run stored before the network moved from ppo: to policy: keeps its
// network when read back (a recovered run must build the network its
// checkpoints hold).
TEST(RunStoreTest, RunsStoredBeforeThePolicyBlockKeepTheirNetwork) {
  auto store = RunStore::Open(DbPath("legacy_policy"));
  ASSERT_OK(store);
  RunSpec legacy = Spec("old");
  legacy.mutable_ppo()->add_hidden_sizes(8);
  legacy.mutable_ppo()->add_hidden_sizes(4);
  legacy.mutable_ppo()->set_shared_trunk(true);
  legacy.mutable_ppo()->set_initial_log_std(-0.5f);
  bool created = false;
  auto stored = (*store)->SubmitRun(legacy, "", &created);
  ASSERT_OK(stored);
  auto read = (*store)->GetRun(stored->run_id());
  ASSERT_OK(read);
  const PolicyConfig& policy = read->spec().policy();
  ASSERT_EQ(policy.hidden_sizes_size(), 2);
  EXPECT_EQ(policy.hidden_sizes(0), 8);
  EXPECT_EQ(policy.hidden_sizes(1), 4);
  EXPECT_TRUE(policy.shared_trunk());
  EXPECT_FLOAT_EQ(policy.initial_log_std(), -0.5f);
  EXPECT_EQ(policy.activation(), "tanh");
  EXPECT_EQ(read->spec().ppo().hidden_sizes_size(), 0);
}

// A run stored before the execution settings moved from ppo: to
// execution: keeps them when read back (a bfloat16 run resumes in
// bfloat16).
TEST(RunStoreTest, RunsStoredBeforeTheExecutionBlockKeepTheirSettings) {
  auto store = RunStore::Open(DbPath("legacy_execution"));
  ASSERT_OK(store);
  RunSpec legacy = Spec("old");
  legacy.mutable_ppo()->set_cpu_kernels("libtorch");
  legacy.mutable_ppo()->set_precision("bfloat16");
  legacy.mutable_ppo()->set_cuda_graphs("off");
  bool created = false;
  auto stored = (*store)->SubmitRun(legacy, "", &created);
  ASSERT_OK(stored);
  auto read = (*store)->GetRun(stored->run_id());
  ASSERT_OK(read);
  const ExecutionConfig& execution = read->spec().execution();
  EXPECT_EQ(execution.cpu_kernels(), "libtorch");
  EXPECT_EQ(execution.precision(), "bfloat16");
  EXPECT_EQ(execution.cuda_graphs(), "off");
  EXPECT_EQ(read->spec().ppo().precision(), "");
}

// A run stored before EnvSpec carried the action bounds and the reward
// range gets them when read back: workers check specs, never fill them in.
TEST(RunStoreTest, RunsStoredBeforeTheRewardRangeGetTheirEnvCompleted) {
  auto store = RunStore::Open(DbPath("legacy_env"));
  ASSERT_OK(store);
  RunSpec legacy = Spec("old");
  legacy.mutable_env()->set_id("Pendulum-v1");
  legacy.mutable_env()->set_observation_size(3);
  legacy.mutable_env()->set_continuous_action_size(1);
  legacy.mutable_env()->set_max_episode_steps(50);  // the run's own limit
  bool created = false;
  auto stored = (*store)->SubmitRun(legacy, "", &created);
  ASSERT_OK(stored);
  auto read = (*store)->GetRun(stored->run_id());
  ASSERT_OK(read);
  const EnvSpec& env = read->spec().env();
  EXPECT_EQ(env.max_episode_steps(), 50);
  EXPECT_EQ(env.action_low(), -2.0f);
  EXPECT_EQ(env.action_high(), 2.0f);
  EXPECT_LT(env.reward_low(), -16.0f);
}

}  // namespace
}  // namespace rl
