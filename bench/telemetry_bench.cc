// Telemetry costs, each next to its comparison in the same run:
//   1. Emit() on the hot path (sender running, connected to a real service)
//      next to std::vector::push_back of the same record: median ns/call.
//   2. Ingestion over loopback gRPC with durable acknowledgements (the
//      service as telemetry_main runs it, TensorBoard files included) next
//      to the store alone: points/s.
//   3. A 1M-point series downsampled to 1,000 buckets (the chunked store)
//      next to SQL GROUP BY over one row per point: ms per query.
//   4. Local training with telemetry on vs off, alternating: env steps/s.
//
//   bazel run --config=opt //bench:telemetry_bench --
//       [--run=examples/cartpole_throughput.yaml] [--only=training]
//       [--training_steps=500000] [--training_rounds=6]
//
// (or bazel-bin/bench/telemetry_bench after a build: a relative --run is
// found as bench/bench_files.h says)
#include <sqlite3.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_files.h"
#include "common/grpc_util.h"
#include "common/port_file.h"
#include "common/sqlite_util.h"
#include "proto/telemetry.grpc.pb.h"
#include "runspec/run_spec.h"
#include "telemetry/client/grpc_transport.h"
#include "telemetry/metric_store.h"
#include "telemetry/telemetry_core.h"
#include "telemetry/telemetry_service.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, run, "examples/cartpole_throughput.yaml",
          "run file for the training comparison");
ABSL_FLAG(int64_t, training_steps, 500000, "env steps per training run");
ABSL_FLAG(int, training_rounds, 6, "rounds of off/on/down training runs");
ABSL_FLAG(int, torch_threads, 1,
          "LibTorch intra-op threads (1, as rl_local's default)");
ABSL_FLAG(int64_t, ingest_points, 6000000, "points for the ingestion test");
ABSL_FLAG(int, ingest_streams, 2, "concurrent Ingest streams");
ABSL_FLAG(std::string, only, "", "emit|ingest|query|training (default: all)");

namespace rl {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       absl::StrCat("telemetry_bench_", getpid(), "_", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// An in-process telemetry service as telemetry_main runs it.
struct Service {
  explicit Service(const fs::path& dir) {
    TelemetryCoreOptions options;
    options.store_path = (dir / "telemetry.db").string();
    options.tensorboard_dir = (dir / "tensorboard").string();
    core = std::move(TelemetryCore::Create(options)).value();
    service = std::make_unique<TelemetryServiceImpl>(core.get());
    ServerOptions server_options;
    server_options.max_receive_message_bytes = 64 << 20;
    server = std::move(StartServer({service.get()}, server_options)).value();
    target = absl::StrCat("127.0.0.1:", server.port);
  }
  ~Service() { server.server->Shutdown(); }
  std::unique_ptr<TelemetryCore> core;
  std::unique_ptr<TelemetryServiceImpl> service;
  RunningServer server;
  std::string target;
};

void BenchEmit() {
  const fs::path dir = TempDir("emit");
  Service service(dir);
  auto emitter = MakeEmitter(service.target);
  emitter->SetRun("bench");
  struct Record {
    const char* name;
    int64_t step;
    double value;
  };
  std::vector<Record> vec;
  constexpr int kPerRound = 64;
  constexpr int kRounds = 20000;
  std::vector<double> emit_ns, labelled_ns, push_ns;
  const MetricLabelList labels = {{"actor", "3"}};
  int64_t step = 0;
  for (int r = 0; r < kRounds; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < kPerRound; ++i) {
      emitter->Emit("learner/policy_loss", ++step, 0.5);
    }
    auto t1 = Clock::now();
    for (int i = 0; i < kPerRound; ++i) {
      vec.push_back({"learner/policy_loss", ++step, 0.5});
    }
    auto t2 = Clock::now();
    if (r % 4 == 0) {
      for (int i = 0; i < kPerRound; ++i) {
        emitter->Emit("actor/episode_return", ++step, 1.0, labels);
      }
      labelled_ns.push_back(Seconds(t2, Clock::now()) * 1e9 / kPerRound);
    }
    emit_ns.push_back(Seconds(t0, t1) * 1e9 / kPerRound);
    push_ns.push_back(Seconds(t1, t2) * 1e9 / kPerRound);
    if (vec.size() > (1 << 20)) vec.clear();
    // Paced so the sender keeps up (every call is accepted, none dropped):
    // ~200k points/s, far above what training emits.
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  const absl::Status flushed = emitter->Flush(absl::Seconds(60));
  const EmitterStats s = emitter->stats();
  std::printf("\n== Emit on the hot path (sender running, real service) ==\n");
  std::printf("  Emit(name, step, value)          median %6.1f ns/call\n",
              Median(emit_ns));
  std::printf("  Emit(..., {actor: 3})            median %6.1f ns/call\n",
              Median(labelled_ns));
  std::printf("  std::vector::push_back           median %6.1f ns/call\n",
              Median(push_ns));
  std::printf(
      "  ratio Emit / push_back           %.2fx   (goal: Emit <= 50 ns: %s)\n",
      Median(emit_ns) / Median(push_ns),
      Median(emit_ns) <= 50 ? "met" : "NOT met");
  std::printf(
      "  points accepted %lld, dropped %lld, acknowledged %lld (%s)\n",
      static_cast<long long>(s.emitted), static_cast<long long>(s.dropped),
      static_cast<long long>(s.acked_points),
      flushed.ok() ? "flushed" : std::string(flushed.message()).c_str());
  fs::remove_all(dir);
}

// Batches of `points` points over 8 series x 2 actors, sequence from `seq`.
MetricBatch MakeBatch(const std::string& source, int64_t seq, int points) {
  MetricBatch b;
  b.set_sequence_number(seq);
  b.set_run_id("bench");
  b.set_source(source);
  b.set_incarnation(1);
  static const char* kNames[] = {"learner/policy_loss",  "learner/value_loss",
                                 "learner/entropy",      "learner/approx_kl",
                                 "actor/episode_return", "actor/env_sps",
                                 "actor/inference_s",    "actor/send_s"};
  for (int i = 0; i < points; ++i) {
    MetricPoint* p = b.add_points();
    p->set_name(kNames[i % 8]);
    p->set_step(seq * points + i);
    p->set_wall_time_ns(1790000000000000000 + seq * points + i);
    p->set_value(i * 0.25);
    if (i % 8 >= 4) (*p->mutable_labels())["actor"] = std::to_string(i % 2);
  }
  return b;
}

void BenchIngest() {
  const int64_t total = absl::GetFlag(FLAGS_ingest_points);
  const int streams = absl::GetFlag(FLAGS_ingest_streams);
  constexpr int kBatchPoints = 4096;
  const int64_t batches_per_stream = total / streams / kBatchPoints;
  std::vector<std::vector<MetricBatch>> batches(streams);
  for (int s = 0; s < streams; ++s) {
    for (int64_t i = 1; i <= batches_per_stream; ++i) {
      batches[s].push_back(MakeBatch(absl::StrCat("s", s), i, kBatchPoints));
    }
  }
  const int64_t points = streams * batches_per_stream * kBatchPoints;

  // The service over loopback gRPC.
  const fs::path dir = TempDir("ingest");
  double grpc_rate = 0;
  {
    Service service(dir);
    auto stub = TelemetryService::NewStub(
        CreateChannel(service.target, ChannelOptions{64 << 20, 64 << 20}));
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    std::vector<int64_t> acked(streams, 0);
    for (int s = 0; s < streams; ++s) {
      threads.emplace_back([&, s] {
        grpc::ClientContext context;
        auto stream = stub->Ingest(&context);
        std::thread reader([&] {
          IngestAck ack;
          while (stream->Read(&ack)) acked[s] = ack.acked_sequence_number();
        });
        for (const MetricBatch& b : batches[s]) stream->Write(b);
        stream->WritesDone();
        reader.join();
        stream->Finish();
      });
    }
    for (auto& t : threads) t.join();
    const double seconds = Seconds(start, Clock::now());
    for (int s = 0; s < streams; ++s) {
      if (acked[s] != batches_per_stream) {
        std::printf("  stream %d: only %lld of %lld batches acknowledged\n", s,
                    static_cast<long long>(acked[s]),
                    static_cast<long long>(batches_per_stream));
      }
    }
    grpc_rate = points / seconds;
  }
  fs::remove_all(dir);

  // The store alone, same batches, groups of 8 per transaction.
  const fs::path dir2 = TempDir("ingest_store");
  double store_rate = 0;
  {
    auto store =
        std::move(MetricStore::Open((dir2 / "store.db").string())).value();
    const auto start = Clock::now();
    std::vector<absl::Status> results;
    std::vector<bool> duplicate;
    for (int64_t i = 0; i < batches_per_stream; i += 4) {
      std::vector<const MetricBatch*> group;
      for (int s = 0; s < streams; ++s) {
        for (int64_t j = i; j < std::min(i + 4, batches_per_stream); ++j) {
          group.push_back(&batches[s][j]);
        }
      }
      if (!store->Write(group, &results, &duplicate).ok()) std::abort();
    }
    store_rate = points / Seconds(start, Clock::now());
  }
  fs::remove_all(dir2);
  std::printf(
      "\n== Ingestion, durable acknowledgements (%lld points, %d streams, "
      "batches of %d) ==\n",
      static_cast<long long>(points), streams, kBatchPoints);
  std::printf(
      "  service over loopback gRPC       %10.0f points/s  (goal >= 1M: %s)\n",
      grpc_rate, grpc_rate >= 1e6 ? "met" : "NOT met");
  std::printf("  store alone (no gRPC, no TB)     %10.0f points/s\n",
              store_rate);
  std::printf("  ratio service / store            %.2f\n",
              grpc_rate / store_rate);
}

void BenchQuery() {
  constexpr int64_t kPoints = 1000000;
  const fs::path dir = TempDir("query");
  auto store =
      std::move(MetricStore::Open((dir / "store.db").string())).value();
  std::vector<absl::Status> results;
  std::vector<bool> duplicate;
  for (int64_t seq = 1; seq * 4096 <= kPoints + 4095; ++seq) {
    MetricBatch b;
    b.set_sequence_number(seq);
    b.set_run_id("bench");
    b.set_source("q");
    for (int64_t i = (seq - 1) * 4096; i < std::min(seq * 4096, kPoints); ++i) {
      MetricPoint* p = b.add_points();
      p->set_name("learner/policy_loss");
      p->set_step(i);
      p->set_wall_time_ns(i);
      p->set_value(std::sin(i * 1e-4));
    }
    if (!store->Write({&b}, &results, &duplicate).ok()) std::abort();
  }
  QueryRequest q;
  q.set_run_id("bench");
  q.add_names("learner/policy_loss");
  q.set_max_buckets(1000);
  std::vector<double> ms;
  size_t buckets = 0;
  for (int r = 0; r < 21; ++r) {
    const auto t0 = Clock::now();
    auto response = store->Query(q);
    ms.push_back(Seconds(t0, Clock::now()) * 1e3);
    buckets = response.ok() ? response->series(0).buckets_size() : 0;
  }

  // One row per point, bucketed by SQL.
  sqlite3* db =
      std::move(OpenDurableDatabase((dir / "rows.db").string())).value();
  ExecSql(db,
          "CREATE TABLE points (series INTEGER, step INTEGER, value REAL);"
          "CREATE INDEX points_by_series ON points (series, step);"
          "BEGIN;")
      .IgnoreError();
  {
    Statement insert(db, "INSERT INTO points VALUES (1, ?, ?);");
    for (int64_t i = 0; i < kPoints; ++i) {
      insert.Reset();
      insert.Bind(1, i);
      insert.BindDouble(2, std::sin(i * 1e-4));
      insert.Step();
    }
  }
  ExecSql(db, "COMMIT;").IgnoreError();
  std::vector<double> sql_ms;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    Statement group(db,
                    "SELECT step / 1000, count(*), min(value), max(value), "
                    "avg(value) FROM points WHERE series = 1 GROUP BY step / "
                    "1000;");
    int rows = 0;
    while (group.Step() == SQLITE_ROW) ++rows;
    sql_ms.push_back(Seconds(t0, Clock::now()) * 1e3);
  }
  sqlite3_close(db);
  std::printf("\n== Query: 1M-point series downsampled to 1,000 buckets ==\n");
  std::printf(
      "  chunked store (min/max/mean/last) median %7.2f ms, %zu buckets  "
      "(goal < 20 ms: %s)\n",
      Median(ms), buckets, Median(ms) < 20 ? "met" : "NOT met");
  std::printf("  one row per point, SQL GROUP BY  median %7.2f ms\n",
              Median(sql_ms));
  std::printf("  ratio chunked / rows             %.2f\n",
              Median(ms) / Median(sql_ms));
  fs::remove_all(dir);
}

void BenchTraining() {
  torch::set_num_threads(absl::GetFlag(FLAGS_torch_threads));
  auto spec = LoadRunSpecFile(BenchFilePath(absl::GetFlag(FLAGS_run)));
  if (!spec.ok()) {
    std::printf("%s\n", spec.status().ToString().c_str());
    return;
  }
  spec->set_total_env_steps(absl::GetFlag(FLAGS_training_steps));
  spec->clear_target_return();
  const fs::path dir = TempDir("training");
  Service service(dir);
  auto emitter = MakeEmitter(service.target);
  emitter->SetRun("bench-training");
  // And one whose service is down (nothing listens on its port): it buffers,
  // then drops and counts.
  auto dead_emitter =
      MakeEmitter(absl::StrCat("127.0.0.1:", PickFreePort().value_or(1)));
  dead_emitter->SetRun("bench-training");
  std::vector<double> off, on, down;
  for (int r = 0; r < absl::GetFlag(FLAGS_training_rounds); ++r) {
    // The order rotates from round to round, so that no mode always runs
    // first (or after the same other mode).
    for (int k = 0; k < 3; ++k) {
      const int mode = (k + r) % 3;
      TrainerOptions options;
      options.emitter = mode == 1   ? emitter.get()
                        : mode == 2 ? dead_emitter.get()
                                    : nullptr;
      auto trainer = std::move(LocalTrainer::Create(*spec, options)).value();
      auto result = trainer->Train();
      if (!result.ok()) {
        std::printf("%s\n", result.status().ToString().c_str());
        return;
      }
      (mode == 1   ? on
       : mode == 2 ? down
                   : off)
          .push_back(result->progress.steps_per_second);
    }
  }
  const EmitterStats dead = dead_emitter->stats();
  const absl::Status flushed = emitter->Flush(absl::Seconds(30));
  const EmitterStats s = emitter->stats();
  // Runs next to each other in time share the machine's state: compare them
  // pairwise (round by round) as well as by medians.
  std::vector<double> on_ratio, down_ratio;
  for (size_t i = 0; i < off.size(); ++i) {
    on_ratio.push_back(on[i] / off[i]);
    down_ratio.push_back(down[i] / off[i]);
  }
  const double m_off = Median(off), m_on = Median(on);
  auto samples = [](const std::vector<double>& v) {
    std::string out;
    for (double x : v) absl::StrAppend(&out, out.empty() ? "" : " ", int(x));
    return out;
  };
  std::printf(
      "\n== Local training (%s, %lld steps x %zu runs each, alternating) ==\n",
      absl::GetFlag(FLAGS_run).c_str(),
      static_cast<long long>(absl::GetFlag(FLAGS_training_steps)), off.size());
  std::printf(
      "  telemetry off                    %10.0f env steps/s (median of %s)\n",
      m_off, samples(off).c_str());
  std::printf(
      "  telemetry on                     %10.0f env steps/s (median of %s)\n",
      m_on, samples(on).c_str());
  std::printf(
      "  telemetry on, service down       %10.0f env steps/s (median of %s: "
      "%+.1f%%; %lld points buffered, %lld dropped and counted)\n",
      Median(down), samples(down).c_str(),
      100.0 * (Median(down) - m_off) / m_off,
      static_cast<long long>(dead.emitted),
      static_cast<long long>(dead.dropped));
  std::printf(
      "  on / off, median of per-round ratios   %+.1f%%  (goal within 3%%: "
      "%s)\n"
      "  down / off, median of per-round ratios %+.1f%%\n",
      100.0 * (Median(on_ratio) - 1),
      std::abs(Median(on_ratio) - 1) <= 0.03 ? "met" : "NOT met",
      100.0 * (Median(down_ratio) - 1));
  std::printf("  points emitted %lld, dropped %lld, acknowledged %lld (%s)\n",
              static_cast<long long>(s.emitted),
              static_cast<long long>(s.dropped),
              static_cast<long long>(s.acked_points),
              flushed.ok() ? "flushed" : "not flushed");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string only = absl::GetFlag(FLAGS_only);
  if (only.empty() || only == "emit") rl::BenchEmit();
  if (only.empty() || only == "ingest") rl::BenchIngest();
  if (only.empty() || only == "query") rl::BenchQuery();
  if (only.empty() || only == "training") rl::BenchTraining();
  return 0;
}
