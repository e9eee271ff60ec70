// The chaos suite: seeded runs on the embedded system (coordinator, local
// telemetry, a learner and two actors as real processes) while a killer,
// driven by a seeded generator, SIGKILLs a random component at random
// points of the runs' progress: an actor, the learner, the telemetry service,
// or the coordinator itself (which takes its children with it; it is started
// again on the same store). Afterwards it checks invariants, not only that the
// runs finished:
//   - every run SUCCEEDED, with at least its step budget;
//   - each run's event log in the coordinator's store is one unbroken chain
//     of transitions from QUEUED to the run's final state;
//   - every run's latest checkpoint loads into the run's network;
//   - no rollout segment was used twice: each run's segment ledger
//     (learner/segment_ledger.h), with the updates that learner restarts
//     rolled back taken out, names every segment at most once, its updates
//     are 1..N with N the latest checkpoint's, and its segments hold
//     exactly the run's env steps (the learner's counters against the
//     segments themselves);
//   - no segment acknowledged then lost: every segment an actor process
//     reported (when it stopped) as acknowledged is in the ledger, used or
//     dropped as stale;
//   - no telemetry point acknowledged as durable is missing: a probe emitter
//     in the test streams numbered points to the telemetry service through
//     all the kills, and every point it saw acknowledged is in the store.
// It prints its figures: runs, faults by kind, runs succeeded, invariants
// checked and violated (0).
//
//   bazel test --config=long //tests:chaos_test --test_output=all
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/port_file.h"
#include "coordinator/run_store.h"
#include "learner/checkpoint.h"
#include "learner/segment_ledger.h"
#include "telemetry/client/grpc_transport.h"
#include "telemetry/metric_store.h"
#include "testing/embedded_coordinator.h"
#include "testing/process_fixture.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

constexpr int kRuns = 3;
constexpr int kFaults = 8;  // two of each kind, in a seeded order
constexpr int64_t kSteps = 36864;

constexpr int64_t kStepsPerSegment = 8 * 32;  // envs_per_actor x length

std::string ChaosRun(int i) {
  return absl::StrCat("name: chaos-", i, R"(
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: )",
                      kSteps, R"(
seed: )",
                      100 + i, R"(
ppo: {learning_rate: 1.0e-3, num_epochs: 4, num_minibatches: 1}
resources: {num_actors: 2}
checkpoint_interval: 2
)");
}

class ChaosTest : public EmbeddedCoordinatorTest {
 protected:
  std::vector<std::string> CoordinatorFlags() const {
    // Failures are the point here: the run must outlive them all.
    return {"--lease_ttl_s=3", "--max_worker_failures=1000",
            absl::StrCat("--telemetry_port=", telemetry_port_)};
  }

  // Free now on loopback: the local telemetry keeps it through coordinator
  // restarts, so the probe emitter's target stays valid.
  int telemetry_port_ = PickFreePort().value_or(0);

  // SIGKILLs the newest process whose command line has all of `args`;
  // false if there is none now.
  bool KillOne(const std::vector<std::string>& args) {
    const std::vector<pid_t> pids = FindProcesses(args);
    if (pids.empty()) return false;
    return kill(pids.back(), SIGKILL) == 0;
  }

  bool AllEnded(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      const RunState state = Get(id).state();
      if (state != SUCCEEDED && state != FAILED && state != CANCELLED) {
        return false;
      }
    }
    return true;
  }
};

TEST_F(ChaosTest, RunsSurviveRandomKillsAndKeepTheirInvariants) {
  std::mt19937 rng(20261124);
  ASSERT_GT(telemetry_port_, 0);
  StartCoordinator("learners=1,actors=2", CoordinatorFlags());
  std::vector<std::string> ids;
  for (int i = 0; i < kRuns; ++i) {
    ids.push_back(Submit(ChaosRun(i), absl::StrCat("chaos-", i)).run_id());
  }

  // The telemetry probe: point k at step k, 50 a second, through every kill.
  EmitterOptions probe_options;
  probe_options.source = "chaos/probe";
  probe_options.batch_interval = absl::Milliseconds(100);
  std::unique_ptr<Emitter> probe =
      MakeEmitter(absl::StrCat("127.0.0.1:", telemetry_port_), probe_options);
  probe->SetRun(ids[0]);
  std::atomic<bool> probing{true};
  std::atomic<int64_t> probe_points{0};
  std::thread prober([&] {
    while (probing.load()) {
      const int64_t k = probe_points.load() + 1;
      probe->Emit("chaos/probe", k, static_cast<double>(k));
      probe_points.store(k);
      absl::SleepFor(absl::Milliseconds(20));
    }
  });

  const std::string coordinator_arg = "--store=" + Path("c.db");
  std::map<std::string, int> faults;
  const char* kinds[] = {"actor", "learner", "telemetry", "coordinator"};
  std::vector<std::string> order;
  for (int i = 0; i < kFaults; ++i) order.push_back(kinds[i % 4]);
  std::shuffle(order.begin(), order.end(), rng);
  // Fault k fires once the runs' summed progress passes a seeded random
  // fraction of their summed budget (all below 80%, so some run is still
  // going), at least 1 to 2.5 s after the previous fault. Tied to progress,
  // not to the clock, the killer finds as much to kill on a fast optimised
  // build as on a loaded slow machine.
  std::vector<int64_t> thresholds;
  for (int i = 0; i < kFaults; ++i) {
    thresholds.push_back(static_cast<int64_t>(
        std::uniform_real_distribution<double>(0.03, 0.78)(rng) * kRuns *
        kSteps));
  }
  std::sort(thresholds.begin(), thresholds.end());
  auto progress = [&] {
    int64_t sum = 0;
    for (const std::string& id : ids) sum += Get(id).progress().env_steps();
    return sum;
  };
  absl::Time previous = absl::Now();
  absl::Duration gap = absl::ZeroDuration();
  const absl::Time deadline = absl::Now() + absl::Minutes(12);
  while (absl::Now() < deadline) {
    int total = 0;
    for (const auto& [kind, n] : faults) total += n;
    if (total >= kFaults || AllEnded(ids)) break;
    if (absl::Now() < previous + gap || progress() < thresholds[total]) {
      absl::SleepFor(absl::Milliseconds(100));
      continue;
    }
    const std::string kind = order[total];
    const std::string coordinator =
        absl::StrCat("--coordinator=127.0.0.1:", port_);
    bool killed = false;
    if (kind == "actor") {
      killed = KillOne(
          {coordinator,
           absl::StrCat("--worker_name=local-actor-",
                        std::uniform_int_distribution<int>(0, 1)(rng))});
    } else if (kind == "learner") {
      killed = KillOne({coordinator, "--worker_name=local-learner-0"});
    } else if (kind == "telemetry") {
      killed = KillOne({"--store=" + Path("runs") + "/telemetry.db"});
    } else {
      StopCoordinator(SIGKILL);
      // Its children die with it (PR_SET_PDEATHSIG); start it again on
      // the same store, as a supervisor would.
      StartCoordinator("learners=1,actors=2", CoordinatorFlags());
      killed = true;
    }
    if (killed) {
      ++faults[kind];
      previous = absl::Now();
      gap = absl::Milliseconds(
          std::uniform_int_distribution<int>(1000, 2500)(rng));
    }
  }

  std::map<std::string, rl::Run> done;
  for (const std::string& id : ids) done[id] = WaitForEnd(id);
  probing.store(false);
  prober.join();
  const absl::Status flushed = probe->Flush(absl::Seconds(60));
  const EmitterStats probe_stats = probe->stats();
  probe.reset();
  ASSERT_EQ(StopCoordinator(SIGTERM), std::optional<int>(0));

  int checked = 0, violated = 0, succeeded = 0;
  int64_t ledger_segments = 0, ledger_rolled_back = 0, learner_starts = 0;
  int64_t probe_acked = 0, probe_stored = 0;
  int64_t actor_reports = 0, acknowledged_segments = 0;
  auto check = [&](bool ok, const std::string& what) {
    ++checked;
    if (!ok) {
      ++violated;
      ADD_FAILURE() << "invariant violated: " << what;
    }
  };
  absl::StatusOr<std::unique_ptr<RunStore>> store =
      RunStore::Open(Path("c.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  for (const auto& [id, run] : done) {
    if (run.state() == SUCCEEDED) ++succeeded;
    check(run.state() == SUCCEEDED,
          absl::StrCat(id, " ended ", RunState_Name(run.state()), ": ",
                       run.failure_reason()));
    check(run.progress().env_steps() >= kSteps,
          absl::StrCat(id, " reached ", run.progress().env_steps(), " of ",
                       kSteps, " steps"));

    // The event log: QUEUED -> ... -> the final state, each transition
    // starting where the previous one ended.
    absl::StatusOr<std::vector<RunEventRecord>> events = (*store)->Events(id);
    check(events.ok() && !events->empty(), absl::StrCat(id, " has events"));
    if (events.ok() && !events->empty()) {
      bool chain = events->front().from == RUN_STATE_UNSPECIFIED &&
                   events->front().to == QUEUED &&
                   events->back().to == run.state();
      for (size_t i = 1; i < events->size(); ++i) {
        chain = chain && (*events)[i].from == (*events)[i - 1].to;
      }
      std::string log;
      for (const RunEventRecord& e : *events) {
        absl::StrAppend(&log, " ", RunState_Name(e.from), "->",
                        RunState_Name(e.to), " (", e.reason, ")");
      }
      check(chain, absl::StrCat(id,
                                "'s event log is one chain from QUEUED "
                                "to its final state:",
                                log));
    }

    // The latest checkpoint loads into the run's network.
    const std::string root = Path("runs") + "/" + id + "/checkpoints";
    absl::StatusOr<std::string> latest = LatestCheckpoint(root);
    check(latest.ok(), absl::StrCat(id, " has a checkpoint under ", root));
    if (latest.ok()) {
      const absl::Status read = ReadRunPolicy(run.spec(), *latest).status();
      check(read.ok(), absl::StrCat(*latest, " loads: ", read.ToString()));
    }

    // No segment used twice; the ledger, the checkpoint and the counters
    // agree.
    const std::string ledger_path =
        SegmentLedgerPath(Path("runs") + "/" + id, 0);
    const std::string ledger = ReadTestFile(ledger_path);
    const SegmentLedgerAudit audit = AuditSegmentLedger(ledger);
    ledger_segments += audit.segments;
    ledger_rolled_back += audit.rolled_back;
    learner_starts += audit.resumes;
    check(audit.resumes >= 1, absl::StrCat(ledger_path, " has its start"));
    std::string violations;
    for (const std::string& v : audit.violations) {
      absl::StrAppend(&violations, "\n    ", v);
    }
    check(audit.violations.empty(),
          absl::StrCat(
              id, ": no segment used twice, updates in order:", violations));
    // Acknowledged, then lost: every segment an actor process said (when
    // it stopped; killed ones say nothing) it had seen acknowledged was
    // used or dropped by a learner of the run.
    std::vector<ActorAcknowledgement> acks;
    for (int a = 0; a < 2; ++a) {
      for (const ActorAcknowledgement& ack : ParseActorAcknowledgements(
               ReadTestFile(
                   absl::StrCat(Path("logs"), "/local-actor-", a, ".log")),
               id)) {
        acks.push_back(ack);
        acknowledged_segments += ack.acknowledged;
      }
    }
    actor_reports += static_cast<int64_t>(acks.size());
    std::string lost;
    for (const std::string& v : CheckAcknowledged(audit, acks)) {
      absl::StrAppend(&lost, "\n    ", v);
    }
    check(lost.empty(),
          absl::StrCat(id, ": no acknowledged segment lost:", lost));
    check(audit.segments * kStepsPerSegment == run.progress().env_steps(),
          absl::StrCat(id, ": its ledger's ", audit.segments, " segments hold ",
                       audit.segments * kStepsPerSegment,
                       " env steps; the run counted ",
                       run.progress().env_steps()));
    if (latest.ok()) {
      check(
          absl::EndsWith(*latest, absl::StrFormat("ckpt-%012d", audit.updates)),
          absl::StrCat(id, ": its ledger's lineage has ", audit.updates,
                       " updates; its latest checkpoint is ", *latest));
    }
  }

  // Every telemetry point acknowledged as durable is in the store.
  {
    check(flushed.ok(), absl::StrCat("the probe's points were all "
                                     "acknowledged: ",
                                     flushed.ToString()));
    absl::StatusOr<std::unique_ptr<MetricStore>> metrics =
        MetricStore::Open(Path("runs") + "/telemetry.db");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    QueryRequest query;
    query.set_run_id(ids[0]);
    query.add_names("chaos/probe");
    absl::StatusOr<QueryResponse> stored = (*metrics)->Query(query);
    std::set<int64_t> steps;
    if (stored.ok()) {
      for (const Series& series : stored->series()) {
        for (const MetricPoint& point : series.points()) {
          steps.insert(point.step());
        }
      }
    }
    probe_acked = probe_stats.acked_points;
    int64_t missing = 0;
    for (int64_t k = 1; k <= probe_acked; ++k) missing += steps.count(k) == 0;
    probe_stored = static_cast<int64_t>(steps.size());
    check(probe_acked > 0 && missing == 0,
          absl::StrCat(missing, " of the ", probe_acked,
                       " probe points acknowledged as durable are missing "
                       "from the store (",
                       probe_stats.dropped, " dropped by the emitter)"));
  }

  int total = 0;
  std::printf("\nchaos figures (seed 20261124)\n");
  std::printf("  runs                  %d\n", kRuns);
  for (const char* kind : kinds) {
    std::printf("  faults: kill %-11s %d\n", kind, faults[kind]);
    total += faults[kind];
  }
  std::printf("  faults in all         %d\n", total);
  std::printf("  runs succeeded        %d of %d\n", succeeded, kRuns);
  std::printf("  learner starts        %lld (ledger resume lines)\n",
              static_cast<long long>(learner_starts));
  std::printf(
      "  segments used         %lld, none twice (%lld updates "
      "rolled back by resumes)\n",
      static_cast<long long>(ledger_segments),
      static_cast<long long>(ledger_rolled_back));
  std::printf(
      "  telemetry probe       %lld points acked, %lld stored, "
      "%lld emitted\n",
      static_cast<long long>(probe_acked), static_cast<long long>(probe_stored),
      static_cast<long long>(probe_points.load()));
  std::printf(
      "  actor reports         %lld (%lld segments acknowledged, "
      "none lost)\n",
      static_cast<long long>(actor_reports),
      static_cast<long long>(acknowledged_segments));
  std::printf("  invariants checked    %d\n", checked);
  std::printf("  invariants violated   %d\n", violated);
  std::fflush(stdout);
  EXPECT_GE(total, 3) << "the killer found too little to kill";
  EXPECT_EQ(violated, 0);
}

}  // namespace
}  // namespace rl
