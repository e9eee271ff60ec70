// Control-plane overhead, in one run:
//  1. SubmitRun throughput over gRPC into the coordinator's durable store
//     (each submission is one SQLite WAL transaction with synchronous=FULL),
//     next to bare SQLite transactions of the same durability.
//  2. Time from SubmitRun to the first rollout segment at the learner on the
//     embedded system (coordinator + local worker processes already up).
//  3. Heartbeats per second from 100 and 1,000 simulated workers (all
//     placed, 10 per run) over gRPC, each reporting the assignment it runs
//     (the reply then carries only its id), beside the same workers
//     reporting none (every reply carries the assignment in full, read from
//     the store under the coordinator's lock: how every heartbeat was
//     answered before).
//
//   bazel run --config=opt //bench:control_plane_bench
#include <signal.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/subprocess.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/coordinator_service.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/learner.grpc.pb.h"

ABSL_FLAG(int, submissions, 3000, "SubmitRun calls for the throughput test");
ABSL_FLAG(int, clients, 8, "concurrent client threads");
ABSL_FLAG(double, heartbeat_seconds, 2, "length of each heartbeat measure");

namespace rl {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

SubmitRunRequest CartPoleRequest() {
  SubmitRunRequest request;
  request.mutable_spec()->mutable_env()->set_id("CartPole-v1");
  request.mutable_spec()->set_name("bench");
  return request;
}

double SubmitThroughput(const std::string& dir) {
  CoordinatorOptions options;
  options.store_path = dir + "/throughput.db";
  options.runs_dir = dir + "/runs";
  // One user submits them all: the store's path, not the per-user quota.
  options.max_queued_runs_per_user = 0;
  auto core = CoordinatorCore::Create(options);
  if (!core.ok()) std::abort();
  RunServiceImpl service(core->get());
  auto server = StartServer({&service}, ServerOptions{});
  if (!server.ok()) std::abort();
  const std::string address = absl::StrCat("127.0.0.1:", server->port);
  const int total = absl::GetFlag(FLAGS_submissions);
  const int clients = absl::GetFlag(FLAGS_clients);
  std::atomic<int> next{0}, failed{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto stub = RunService::NewStub(CreateChannel(address));
      const SubmitRunRequest request = CartPoleRequest();
      while (next.fetch_add(1) < total) {
        SubmitRunResponse response;
        auto context = ContextWithDeadline(absl::Seconds(30));
        if (!stub->SubmitRun(context.get(), request, &response).ok()) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  const double rate = total / Seconds(start);
  server->server->Shutdown();
  if (failed > 0)
    std::fprintf(stderr, "%d submissions failed\n", failed.load());
  return rate;
}

double BareSqliteCommits(const std::string& dir, int n) {
  sqlite3* db;
  sqlite3_open((dir + "/bare.db").c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
               "CREATE TABLE t(x BLOB);",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* insert;
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES(zeroblob(200));", -1, &insert,
                     nullptr);
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    sqlite3_exec(db, "BEGIN IMMEDIATE;", nullptr, nullptr, nullptr);
    sqlite3_step(insert);
    sqlite3_reset(insert);
    sqlite3_exec(db, "COMMIT;", nullptr, nullptr, nullptr);
  }
  const double rate = n / Seconds(start);
  sqlite3_finalize(insert);
  sqlite3_close(db);
  return rate;
}

// Heartbeats/s from `workers` simulated workers over gRPC (`clients`
// threads, each its share of the workers in turn). `report_running`: each
// sends the assignment id it runs; else 0 (the reply is then the full
// assignment).
double HeartbeatRate(const std::string& dir, int workers, bool report_running) {
  CoordinatorOptions options;
  options.store_path =
      absl::StrCat(dir, "/heartbeats_", workers, "_", report_running, ".db");
  options.runs_dir = dir + "/runs";
  auto core = CoordinatorCore::Create(options);
  if (!core.ok()) std::abort();
  constexpr int kPerRun = 10;  // 1 learner, 9 actors
  for (int r = 0; r < workers / kPerRun; ++r) {
    SubmitRunRequest run = CartPoleRequest();
    run.mutable_spec()->mutable_resources()->set_num_learners(1);
    run.mutable_spec()->mutable_resources()->set_num_actors(kPerRun - 1);
    if (!(*core)->SubmitRun(run).ok()) std::abort();
  }
  std::vector<HeartbeatRequest> beats(workers);
  for (int w = 0; w < workers; ++w) {
    const bool learner = w % kPerRun == 0;
    RegisterWorkerRequest request;
    request.set_worker_name(absl::StrCat(learner ? "learner-" : "actor-", w));
    request.mutable_capabilities()->set_role(learner ? LEARNER : ACTOR);
    if (learner) request.set_address(absl::StrCat("127.0.0.1:", 20000 + w));
    auto registered = (*core)->RegisterWorker(request);
    if (!registered.ok()) std::abort();
    beats[w].set_worker_id(registered->worker_id());
    beats[w].set_worker_key(registered->worker_key());
    beats[w].set_lease_epoch(registered->lease().epoch());
  }
  (*core)->Tick();
  int placed = 0;
  for (HeartbeatRequest& beat : beats) {
    auto reply = (*core)->Heartbeat(beat);
    if (!reply.ok()) std::abort();
    placed += !reply->assignment().run_id().empty();
    if (report_running) {
      beat.set_running_assignment_id(reply->assignment().assignment_id());
    }
  }
  if (placed != workers) {
    std::fprintf(stderr, "only %d of %d workers placed\n", placed, workers);
  }
  WorkerServiceImpl service(core->get());
  auto server = StartServer({&service}, ServerOptions{});
  if (!server.ok()) std::abort();
  const std::string address = absl::StrCat("127.0.0.1:", server->port);
  const int clients = absl::GetFlag(FLAGS_clients);
  const absl::Duration length =
      absl::Seconds(absl::GetFlag(FLAGS_heartbeat_seconds));
  std::atomic<int64_t> done{0}, failed{0};
  std::atomic<int64_t> reply_bytes{0};
  const absl::Time end = absl::Now() + length;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = WorkerService::NewStub(CreateChannel(address));
      int64_t mine = 0;
      for (int w = c; absl::Now() < end; w += clients) {
        if (w >= workers) w = c % workers;
        HeartbeatResponse reply;
        auto context = ContextWithDeadline(absl::Seconds(30));
        if (!stub->Heartbeat(context.get(), beats[w], &reply).ok()) {
          ++failed;
          continue;
        }
        reply_bytes += static_cast<int64_t>(reply.ByteSizeLong());
        ++mine;
      }
      done += mine;
    });
  }
  for (auto& t : threads) t.join();
  server->server->Shutdown();
  if (failed > 0)
    std::fprintf(stderr, "%ld heartbeats failed\n", failed.load());
  std::fprintf(stderr,
               "  %d workers, %s: %ld heartbeats, %.0f reply bytes each\n",
               workers, report_running ? "running id" : "no id", done.load(),
               done > 0 ? static_cast<double>(reply_bytes) / done : 0.0);
  return done / absl::ToDoubleSeconds(length);
}

// Seconds from SubmitRun until the learner has received a segment.
double SubmitToFirstSegment(const std::string& dir) {
  const std::string port_file = dir + "/port";
  Subprocess coordinator(
      {"coordinator/coordinator_main", "--port=0", "--port_file=" + port_file,
       "--store=" + dir + "/embedded.db", "--runs_dir=" + dir + "/runs",
       "--log_dir=" + dir + "/logs", "--local_workers=learners=1,actors=1",
       // Loopback without tokens: this bench's calls carry none.
       "--insecure"},
      dir + "/coordinator.log");
  auto port = WaitForFile(port_file, absl::Seconds(30));
  if (!port) std::abort();
  auto stub = RunService::NewStub(
      CreateChannel(absl::StrCat("127.0.0.1:", std::atoi(port->c_str()))));
  // Wait until both workers have registered (process start is not counted).
  std::string learner_address;
  for (int i = 0; i < 600 && learner_address.empty(); ++i) {
    ListWorkersResponse workers;
    auto context = ContextWithDeadline(absl::Seconds(5));
    stub->ListWorkers(context.get(), ListWorkersRequest(), &workers);
    if (workers.workers_size() == 2) {
      for (const auto& w : workers.workers()) {
        if (w.capabilities().role() == LEARNER) learner_address = w.address();
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  auto learner = LearnerService::NewStub(CreateChannel(learner_address));
  const auto start = Clock::now();
  SubmitRunResponse response;
  auto context = ContextWithDeadline(absl::Seconds(10));
  stub->SubmitRun(context.get(), CartPoleRequest(), &response);
  double seconds = -1;
  while (Seconds(start) < 60) {
    LearnerStatus status;
    auto c = ContextWithDeadline(absl::Seconds(2));
    if (learner->GetStatus(c.get(), GetLearnerStatusRequest(), &status).ok() &&
        status.segments_received() > 0) {
      seconds = Seconds(start);
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  coordinator.Signal(SIGTERM);
  coordinator.Wait(absl::Seconds(30));
  return seconds;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir =
      (std::filesystem::temp_directory_path() / "rl_control_plane_bench")
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const double submit = rl::SubmitThroughput(dir);
  const double bare = rl::BareSqliteCommits(dir, 2000);
  const double first = rl::SubmitToFirstSegment(dir);
  struct HeartbeatFigures {
    int workers;
    double full, changed_only;
  };
  std::vector<HeartbeatFigures> heartbeats;
  for (int workers : {100, 1000}) {
    heartbeats.push_back({workers, rl::HeartbeatRate(dir, workers, false),
                          rl::HeartbeatRate(dir, workers, true)});
  }
  std::printf("%-58s %12s\n", "measure", "value");
  std::printf("%-58s %12.0f /s  (goal >= 1000)\n",
              absl::StrCat("SubmitRun over gRPC, durable, ",
                           absl::GetFlag(FLAGS_clients), " clients")
                  .c_str(),
              submit);
  std::printf("%-58s %12.0f /s  (SubmitRun at %.0f%% of it)\n",
              "bare SQLite WAL transactions, synchronous=FULL", bare,
              100 * submit / bare);
  std::printf("%-58s %12.3f s   (goal < 2 s)\n",
              "SubmitRun -> first rollout segment at the learner", first);
  for (const auto& h : heartbeats) {
    std::printf("%-58s %12.0f /s\n",
                absl::StrCat("heartbeats, ", h.workers,
                             " workers, full assignment every reply (before)")
                    .c_str(),
                h.full);
    std::printf("%-58s %12.0f /s  (%.2fx)\n",
                absl::StrCat("heartbeats, ", h.workers,
                             " workers, assignment only on change (now)")
                    .c_str(),
                h.changed_only, h.changed_only / h.full);
  }
  return 0;
}
