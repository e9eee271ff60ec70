// TelemetryService in-process (no port): queries, watch and list see the
// points, bad input gets the right codes while the service keeps serving.
// The emitter's gRPC transport dials an address, so the tests of emitter and
// service together also serve the service on a loopback port.
#include "telemetry/telemetry_service.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_message.h"
#include "common/grpc_util.h"
#include "common/raw_client_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/telemetry.grpc.pb.h"
#include "telemetry/client/grpc_transport.h"
#include "telemetry/telemetry_core.h"
#include "testing/in_process_server.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class TelemetryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  // A fresh core and service with `core_limits` (store path and
  // TensorBoard directory set here) and `service_options`.
  void Start(TelemetryCoreOptions core_limits = {},
             TelemetryServiceOptions service_options = {}) {
    if (server_.server) server_.server->Shutdown();
    server_ = {};
    service_.reset();
    core_.reset();
    const std::string dir = MakeTestDir(absl::StrCat("dir", ++starts_));
    TelemetryCoreOptions options = std::move(core_limits);
    options.store_path = dir + "/telemetry.db";
    options.tensorboard_dir = dir + "/tb";
    ASSERT_OK_AND_ASSIGN(core_, TelemetryCore::Create(options));
    service_ =
        std::make_unique<TelemetryServiceImpl>(core_.get(), service_options);
    InProcessServerOptions server_options;
    server_options.max_receive_message_bytes = 64 << 20;
    ASSERT_OK_AND_ASSIGN(
        server_, StartInProcessServer({service_.get()}, server_options));
    stub_ = TelemetryService::NewStub(server_.channel);
  }
  void TearDown() override {
    if (tcp_.server) tcp_.server->Shutdown();
    if (server_.server) server_.server->Shutdown();
  }

  // Serves the service on a loopback port as well (for the emitter's
  // transport, which dials an address); returns "127.0.0.1:port".
  std::string ServeOnPort() {
    ServerOptions options;
    options.max_receive_message_bytes = 64 << 20;
    auto server = StartServer({service_.get()}, options);
    EXPECT_OK(server);
    if (!server.ok()) return "";
    tcp_ = std::move(*server);
    return "127.0.0.1:" + std::to_string(tcp_.port);
  }

  MetricBatch Batch(int64_t seq, const std::string& run, int points) {
    MetricBatch b;
    b.set_sequence_number(seq);
    b.set_run_id(run);
    b.set_source("test/0");
    b.set_incarnation(7);
    for (int i = 0; i < points; ++i) {
      MetricPoint* p = b.add_points();
      p->set_name("m");
      p->set_step(seq * 1000 + i);
      p->set_value(i);
    }
    return b;
  }

  // Stores `batch` through one Ingest stream; its final status.
  grpc::Status IngestOne(const MetricBatch& batch) {
    grpc::ClientContext context;
    auto stream = stub_->Ingest(&context);
    if (!stream->Write(batch)) return stream->Finish();
    stream->WritesDone();
    IngestAck ack;
    while (stream->Read(&ack)) {
    }
    return stream->Finish();
  }

  // A watch of `run` (names under "learner/") whose client reads nothing
  // until told; a client-side reader of the in-process channel, which
  // takes a message only when read, so the server's writes back up at once.
  struct Watching {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<MetricPoint>> reader;
  };
  std::unique_ptr<Watching> Watch(const std::string& run) {
    auto w = std::make_unique<Watching>();
    // A regression fails the test rather than hanging it.
    w->context.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    WatchRequest request;
    request.set_run_id(run);
    request.set_name_prefix("learner/");
    w->reader = stub_->Watch(&w->context, request);
    return w;
  }

  // `points` points of `run` with long names, steps from `first_step`.
  MetricBatch WatchedBatch(int64_t seq, const std::string& run, int points,
                           int64_t first_step) {
    MetricBatch b = Batch(seq, run, points);
    for (int i = 0; i < points; ++i) {
      b.mutable_points(i)->set_name("learner/" + std::string(100, 'x'));
      b.mutable_points(i)->set_step(first_step + i);
    }
    return b;
  }

  int starts_ = 0;
  std::unique_ptr<TelemetryCore> core_;
  std::unique_ptr<TelemetryServiceImpl> service_;
  InProcessServer server_;
  RunningServer tcp_;
  std::unique_ptr<TelemetryService::Stub> stub_;
};

TEST_F(TelemetryServiceTest, EmitterDeliversAndQueriesSeeThePoints) {
  EmitterOptions options;
  options.source = "learner/0";
  options.batch_max_points = 1000;
  auto emitter = MakeEmitter(ServeOnPort(), options);
  emitter->SetRun("run-1");
  for (int i = 0; i < 5000; ++i) {
    emitter->Emit("learner/loss", i, 0.5 * i);
    emitter->Emit("actor/episode_return", i, i % 3,
                  {{"actor", std::to_string(i % 2)}});
  }
  ASSERT_OK(emitter->Flush(absl::Seconds(60)));
  EXPECT_EQ(emitter->stats().acked_points, 10000);
  EXPECT_EQ(emitter->stats().dropped, 0);

  QueryRequest q;
  q.set_run_id("run-1");
  q.add_names("learner/loss");
  QueryResponse raw;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->Query(&c1, q, &raw).ok());
  ASSERT_EQ(raw.series_size(), 1);
  ASSERT_EQ(raw.series(0).points_size(), 5000);
  EXPECT_EQ(raw.series(0).points(4999).step(), 4999);
  EXPECT_DOUBLE_EQ(raw.series(0).points(4999).value(), 0.5 * 4999);
  EXPECT_GT(raw.series(0).points(0).wall_time_ns(), 0);

  // Downsampled, and merged across actors.
  q.clear_names();
  q.add_names("actor/episode_return");
  q.set_max_buckets(10);
  q.add_aggregate_labels("actor");
  q.set_aggregation(AGGREGATE_MEAN);
  QueryResponse buckets;
  grpc::ClientContext c2;
  ASSERT_TRUE(stub_->Query(&c2, q, &buckets).ok());
  ASSERT_EQ(buckets.series_size(), 1);
  EXPECT_TRUE(buckets.series(0).labels().empty());
  ASSERT_EQ(buckets.series(0).buckets_size(), 10);
  int64_t total = 0;
  for (const Bucket& b : buckets.series(0).buckets()) {
    total += b.count();
    EXPECT_GE(b.min(), 0);
    EXPECT_LE(b.max(), 2);
    EXPECT_NEAR(b.mean(), 1.0, 0.01);
  }
  EXPECT_EQ(total, 5000);

  ListSeriesRequest list;
  list.set_run_id("run-1");
  ListSeriesResponse series;
  grpc::ClientContext c3;
  ASSERT_TRUE(stub_->ListSeries(&c3, list, &series).ok());
  EXPECT_EQ(series.series_size(), 3);  // loss + 2 actor label sets
}

TEST_F(TelemetryServiceTest, UnknownRunIsNotFoundAndBadQueriesInvalid) {
  QueryRequest q;
  q.set_run_id("no-such-run");
  QueryResponse r;
  grpc::ClientContext c1;
  EXPECT_EQ(stub_->Query(&c1, q, &r).error_code(), grpc::NOT_FOUND);
  q.set_run_id("");
  grpc::ClientContext c2;
  grpc::Status s = stub_->Query(&c2, q, &r);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("run_id"));
}

TEST_F(TelemetryServiceTest, MalformedBatchEndsTheStreamAfterEarlierAcks) {
  grpc::ClientContext context;
  auto stream = stub_->Ingest(&context);
  ASSERT_TRUE(stream->Write(Batch(1, "run-2", 10)));
  MetricBatch bad = Batch(2, "run-2", 3);
  bad.mutable_points(1)->set_name("");
  ASSERT_TRUE(stream->Write(bad));
  stream->WritesDone();
  IngestAck ack;
  int64_t acked = 0;
  while (stream->Read(&ack)) acked = ack.acked_sequence_number();
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(acked, 1);
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("batch.points[1].name"));

  // A huge label set is refused too.
  grpc::ClientContext context2;
  auto stream2 = stub_->Ingest(&context2);
  MetricBatch labels = Batch(3, "run-2", 1);
  for (int i = 0; i < 100; ++i) {
    (*labels.mutable_points(0)->mutable_labels())["k" + std::to_string(i)] =
        "v";
  }
  ASSERT_TRUE(stream2->Write(labels));
  stream2->WritesDone();
  while (stream2->Read(&ack)) {
  }
  const grpc::Status status2 = stream2->Finish();
  EXPECT_EQ(status2.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(status2.error_message(), HasSubstr("labels"));

  // The accepted batch is stored, the service still serves.
  QueryRequest q;
  q.set_run_id("run-2");
  QueryResponse r;
  grpc::ClientContext c;
  ASSERT_TRUE(stub_->Query(&c, q, &r).ok());
  ASSERT_EQ(r.series_size(), 1);
  EXPECT_EQ(r.series(0).points_size(), 10);
}

// Bytes that are no MetricBatch end the stream with INVALID_ARGUMENT naming
// why (they once ended it OK, taken for the client's end of the stream),
// after the batches before them are acknowledged.
TEST_F(TelemetryServiceTest, UnparseableBytesEndTheStreamWithInvalidArgument) {
  grpc::ClientContext context;
  RawClientStream<IngestAck> stream(server_.channel,
                                    "/rl.TelemetryService/Ingest", &context);
  ASSERT_TRUE(stream.Write(SerializeCopy(Batch(1, "run-raw", 3))));
  // Field 1 (run_id) declares 100 bytes; 2 follow.
  const std::string garbage("\x0a\x64ab", 4);
  grpc::Slice slice(garbage);
  ASSERT_TRUE(stream.Write(grpc::ByteBuffer(&slice, 1)));
  stream.WritesDone();
  IngestAck ack;
  int64_t acked = 0;
  while (stream.Read(&ack)) acked = ack.acked_sequence_number();
  const grpc::Status status = stream.Finish();
  EXPECT_EQ(acked, 1);
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT)
      << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("batch"));
}

// A batch the store refuses for good (a new run beyond max_runs) ends the
// stream with FAILED_PRECONDITION, acknowledged up to the batch before it
// only, so the client knows which one to drop; a later batch on that stream
// is not lost: resent, it is stored (once).
TEST_F(TelemetryServiceTest, BatchBeyondMaxRunsEndsTheStreamAfterEarlierAcks) {
  TelemetryCoreOptions limits;
  limits.store.max_runs = 1;
  Start(limits);
  const MetricBatch later = Batch(3, "run-a", 2);
  {
    grpc::ClientContext context;
    auto stream = stub_->Ingest(&context);
    ASSERT_TRUE(stream->Write(Batch(1, "run-a", 5)));
    ASSERT_TRUE(stream->Write(Batch(2, "run-b", 3)));
    stream->Write(later);
    stream->WritesDone();
    IngestAck ack;
    int64_t acked = 0;
    while (stream->Read(&ack)) acked = ack.acked_sequence_number();
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(acked, 1);
    EXPECT_EQ(status.error_code(), grpc::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("(max_runs)"));
  }
  EXPECT_EQ(core_->stats().refused_runs, 1);

  grpc::ClientContext context;
  auto stream = stub_->Ingest(&context);
  ASSERT_TRUE(stream->Write(later));
  stream->WritesDone();
  IngestAck ack;
  int64_t acked = 0;
  while (stream->Read(&ack)) acked = ack.acked_sequence_number();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(acked, 3);
  QueryRequest q;
  q.set_run_id("run-a");
  QueryResponse r;
  grpc::ClientContext c;
  ASSERT_TRUE(stub_->Query(&c, q, &r).ok());
  ASSERT_EQ(r.series_size(), 1);
  EXPECT_EQ(r.series(0).points_size(), 7);
}

// The emitter drops (and counts) a batch of a run the store refuses for
// good, and its later batches get through.
TEST_F(TelemetryServiceTest, EmitterDropsABatchBeyondMaxRunsAndGoesOn) {
  TelemetryCoreOptions limits;
  limits.store.max_runs = 1;
  Start(limits);
  EmitterOptions options;
  options.batch_interval = absl::Seconds(10);  // batches sealed by Flush
  options.max_backoff = absl::Milliseconds(200);
  auto emitter = MakeEmitter(ServeOnPort(), options);
  emitter->SetRun("run-a");
  emitter->Emit("m", 1, 1);
  ASSERT_OK(emitter->Flush(absl::Seconds(60)));
  emitter->SetRun("run-b");
  for (int i = 0; i < 3; ++i) emitter->Emit("m", i, i);
  ASSERT_OK(emitter->Flush(absl::Seconds(60)));
  emitter->SetRun("run-a");
  emitter->Emit("m", 2, 2);
  ASSERT_OK(emitter->Flush(absl::Seconds(60)));

  const EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.dropped, 3);
  EXPECT_EQ(stats.rejected_batches, 1);
  EXPECT_EQ(stats.acked_points, 2);
  EXPECT_EQ(core_->stats().refused_runs, 1);
  QueryRequest q;
  q.set_run_id("run-a");
  q.add_names("m");
  QueryResponse r;
  grpc::ClientContext c;
  ASSERT_TRUE(stub_->Query(&c, q, &r).ok());
  ASSERT_EQ(r.series_size(), 1);
  EXPECT_EQ(r.series(0).points_size(), 2);
}

TEST_F(TelemetryServiceTest, ResentBatchesAreStoredOnceAndNaNKept) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext context;
    auto stream = stub_->Ingest(&context);
    MetricBatch b = Batch(1, "run-3", 4);
    b.mutable_points(2)->set_value(std::nan(""));
    b.mutable_points(3)->set_value(-INFINITY);
    ASSERT_TRUE(stream->Write(b));
    stream->WritesDone();
    IngestAck ack;
    int64_t acked = 0;
    while (stream->Read(&ack)) acked = ack.acked_sequence_number();
    ASSERT_TRUE(stream->Finish().ok());
    EXPECT_EQ(acked, 1);
  }
  QueryRequest q;
  q.set_run_id("run-3");
  QueryResponse r;
  grpc::ClientContext c;
  ASSERT_TRUE(stub_->Query(&c, q, &r).ok());
  ASSERT_EQ(r.series(0).points_size(), 4);
  EXPECT_TRUE(std::isnan(r.series(0).points(2).value()));
  EXPECT_EQ(r.series(0).points(3).value(), -INFINITY);
  EXPECT_EQ(core_->stats().duplicate_batches, 1);
}

// A point without a wall time once kept its 0, which made its run look
// decades old to retention: the run was deleted on the next pass.
TEST_F(TelemetryServiceTest, APointWithoutAWallTimeTakesItsArrival) {
  MetricBatch b = Batch(1, "run-wall", 2);
  b.mutable_points(1)->set_wall_time_ns(123456789);
  const int64_t before = absl::ToUnixNanos(absl::Now());
  ASSERT_TRUE(IngestOne(b).ok());
  const int64_t after = absl::ToUnixNanos(absl::Now());
  QueryRequest q;
  q.set_run_id("run-wall");
  QueryResponse r;
  grpc::ClientContext c;
  ASSERT_TRUE(stub_->Query(&c, q, &r).ok());
  ASSERT_EQ(r.series_size(), 1);
  ASSERT_EQ(r.series(0).points_size(), 2);
  EXPECT_GE(r.series(0).points(0).wall_time_ns(), before);
  EXPECT_LE(r.series(0).points(0).wall_time_ns(), after);
  EXPECT_EQ(r.series(0).points(1).wall_time_ns(), 123456789);
}

TEST_F(TelemetryServiceTest, WatchTailsNewPoints) {
  grpc::ClientContext context;
  WatchRequest w;
  w.set_run_id("run-4");
  w.set_name_prefix("learner/");
  auto reader = stub_->Watch(&context, w);
  // Points stored before the watcher is registered are not tailed.
  ASSERT_TRUE(
      WaitFor([&] { return core_->stats().watchers == 1; }, absl::Seconds(60)));
  grpc::ClientContext ingest_context;
  auto ingest = stub_->Ingest(&ingest_context);
  MetricBatch batch;
  batch.set_sequence_number(1);
  batch.set_run_id("run-4");
  batch.set_source("test/0");
  batch.set_incarnation(7);
  for (int i = 0; i < 20; ++i) {
    for (const char* name : {"learner/kl", "actor/other"}) {  // other: filtered
      MetricPoint* point = batch.add_points();
      point->set_name(name);
      point->set_step(i);
      point->set_value(i);
    }
  }
  ASSERT_TRUE(ingest->Write(batch));
  ingest->WritesDone();
  IngestAck ack;
  int64_t acked = 0;
  while (ingest->Read(&ack)) acked = ack.acked_sequence_number();
  ASSERT_TRUE(ingest->Finish().ok());
  ASSERT_EQ(acked, 1);
  MetricPoint p;
  int seen = 0;
  while (seen < 20 && reader->Read(&p)) {
    EXPECT_EQ(p.name(), "learner/kl");
    EXPECT_EQ(p.step(), seen);
    ++seen;
  }
  EXPECT_EQ(seen, 20);
  context.TryCancel();

  grpc::ClientContext bad_context;
  WatchRequest bad;
  auto bad_reader = stub_->Watch(&bad_context, bad);
  EXPECT_FALSE(bad_reader->Read(&p));
  EXPECT_EQ(bad_reader->Finish().error_code(), grpc::INVALID_ARGUMENT);
}

// One client (here every call: one identity, one host) holds at most its
// share of the ingest streams; a stream that ends gives its place back.
TEST_F(TelemetryServiceTest, IngestStreamsBeyondAClientsShareAreRefused) {
  TelemetryServiceOptions service_options;
  service_options.max_ingest_streams = 8;
  service_options.max_ingest_streams_per_client = 2;
  Start({}, service_options);
  grpc::ClientContext c1, c2, c3, c4;
  auto s1 = stub_->Ingest(&c1);
  auto s2 = stub_->Ingest(&c2);
  IngestAck ack;
  ASSERT_TRUE(s1->Write(Batch(1, "run-9", 1)));
  ASSERT_TRUE(s1->Read(&ack));
  ASSERT_TRUE(s2->Write(Batch(1, "run-9", 1)));
  ASSERT_TRUE(s2->Read(&ack));
  EXPECT_EQ(service_->open_ingest_streams(), 2);
  auto s3 = stub_->Ingest(&c3);
  EXPECT_FALSE(s3->Read(&ack));
  const grpc::Status refused = s3->Finish();
  EXPECT_EQ(refused.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("at most 2 per client (--max_ingest_streams_per_"
                        "client)"));
  EXPECT_EQ(service_->refused_ingest_streams_per_client(), 1);
  EXPECT_EQ(service_->refused_ingest_streams(), 0);

  s1->WritesDone();
  EXPECT_TRUE(s1->Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return service_->open_ingest_streams() == 1; },
                      absl::Seconds(60)));
  auto s4 = stub_->Ingest(&c4);
  ASSERT_TRUE(s4->Write(Batch(2, "run-9", 1)));
  ASSERT_TRUE(s4->Read(&ack));
  s2->WritesDone();
  s4->WritesDone();
  EXPECT_TRUE(s2->Finish().ok());
  EXPECT_TRUE(s4->Finish().ok());
}

TEST_F(TelemetryServiceTest, WatchersBeyondTheLimitAreRefused) {
  TelemetryCoreOptions limits;
  limits.max_watchers = 2;
  Start(limits);
  auto first = Watch("run-6");
  auto second = Watch("run-6");
  ASSERT_TRUE(
      WaitFor([&] { return core_->stats().watchers == 2; }, absl::Seconds(60)));
  auto third = Watch("run-6");
  MetricPoint p;
  EXPECT_FALSE(third->reader->Read(&p));
  const grpc::Status refused = third->reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("at most 2 (max_watchers)"));
  EXPECT_EQ(core_->stats().refused_watchers, 1);

  // A watcher that leaves makes room for another.
  first->context.TryCancel();
  EXPECT_EQ(first->reader->Finish().error_code(), grpc::CANCELLED);
  ASSERT_TRUE(
      WaitFor([&] { return core_->stats().watchers == 1; }, absl::Seconds(60)));
  auto fourth = Watch("run-6");
  ASSERT_TRUE(
      WaitFor([&] { return core_->stats().watchers == 2; }, absl::Seconds(60)));
  EXPECT_EQ(core_->stats().refused_watchers, 1);
  second->context.TryCancel();
  fourth->context.TryCancel();
  second->reader->Finish();
  fourth->reader->Finish();
}

// A client that stops reading: once its unread points pass the bound the
// server frees them and ends the stream with RESOURCE_EXHAUSTED (after the
// points already sent), and the watcher is gone.
TEST_F(TelemetryServiceTest, WatcherThatFallsBehindIsEndedAndFreed) {
  TelemetryServiceOptions service_options;
  service_options.max_watch_backlog_bytes = 64 << 10;
  Start({}, service_options);
  auto watch = Watch("run-7");
  ASSERT_TRUE(
      WaitFor([&] { return core_->stats().watchers == 1; }, absl::Seconds(60)));
  // 200 points of ~200 bytes each per batch: a few batches pass 64 KiB.
  constexpr int kPoints = 200;
  int64_t sent = 0;
  for (int64_t seq = 1; seq <= 100; ++seq) {
    ASSERT_TRUE(IngestOne(WatchedBatch(seq, "run-7", kPoints, sent)).ok());
    sent += kPoints;
    if (core_->stats().refused_watch_backlog > 0) break;
  }
  ASSERT_EQ(core_->stats().refused_watch_backlog, 1) << sent << " points sent";
  EXPECT_EQ(core_->stats().watchers, 0);
  EXPECT_EQ(service_->watch_backlog_bytes(), 0);

  // The client gets what was sent before, in order, then the reason.
  MetricPoint p;
  int64_t read = 0;
  while (watch->reader->Read(&p)) {
    EXPECT_EQ(p.step(), read);
    ++read;
  }
  EXPECT_LT(read, sent);
  const grpc::Status status = watch->reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("watcher fell behind by"));
  EXPECT_THAT(status.error_message(), HasSubstr("max_watch_backlog_bytes"));
}

// A client that leaves without reading: everything queued for it goes.
TEST_F(TelemetryServiceTest, WatcherThatLeavesWithoutReadingIsFreed) {
  auto watch = Watch("run-8");
  ASSERT_TRUE(
      WaitFor([&] { return core_->stats().watchers == 1; }, absl::Seconds(60)));
  ASSERT_TRUE(IngestOne(WatchedBatch(1, "run-8", 100, 0)).ok());
  EXPECT_GT(service_->watch_backlog_bytes(), 0);
  watch->context.TryCancel();
  EXPECT_EQ(watch->reader->Finish().error_code(), grpc::CANCELLED);
  ASSERT_TRUE(WaitFor(
      [&] {
        return core_->stats().watchers == 0 &&
               service_->watch_backlog_bytes() == 0;
      },
      absl::Seconds(60)));
  EXPECT_EQ(core_->stats().refused_watch_backlog, 0);
}

TEST_F(TelemetryServiceTest, EmitterBuffersWhileTheServiceIsDownThenDelivers) {
  const std::string target = ServeOnPort();
  ASSERT_FALSE(target.empty());
  tcp_.server->Shutdown();
  tcp_.server.reset();
  EmitterOptions options;
  options.max_backoff = absl::Milliseconds(200);
  auto emitter = MakeEmitter(target, options);
  emitter->SetRun("run-5");
  for (int i = 0; i < 1000; ++i) emitter->Emit("m", i, i);
  EXPECT_THAT(emitter->Flush(absl::Milliseconds(500)), Not(IsOk()));
  // Back on the same port.
  ServerOptions server_options;
  server_options.address = target;
  ASSERT_OK_AND_ASSIGN(tcp_, StartServer({service_.get()}, server_options));
  ASSERT_OK(emitter->Flush(absl::Seconds(60)));
  EXPECT_EQ(emitter->stats().acked_points, 1000);
}

}  // namespace
}  // namespace rl
