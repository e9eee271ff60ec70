#include "telemetry/client/emitter.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::Not;

// Generous: the machine running the tests may be heavily loaded.
constexpr absl::Duration kLong = absl::Seconds(60);

// The service end of a fake transport. Thread-safe. Records every batch it
// receives (with the stream it came on), acknowledges automatically or on
// demand, can be "down" (Connect fails, Send fails, the current stream ends
// with UNAVAILABLE) and can end the stream with a given status when a given
// sequence number arrives.
class FakeService {
 public:
  struct Received {
    int stream;
    MetricBatch batch;
  };

  void SetUp(bool up) {
    absl::MutexLock lock(&mu_);
    up_ = up;
    if (!up && open_ && end_.ok()) end_ = absl::UnavailableError("down");
  }
  void SetAutoAck(bool on) {
    absl::MutexLock lock(&mu_);
    auto_ack_ = on;
  }
  // Queues an acknowledgement on the current stream.
  void Ack(int64_t sequence_number) {
    absl::MutexLock lock(&mu_);
    if (open_ && end_.ok()) acks_.push_back(sequence_number);
  }
  // The next time `sequence_number` arrives, the stream ends with `status`
  // (after the acknowledgements already queued).
  void RejectOnce(int64_t sequence_number,
                  absl::Status status =
                      absl::InvalidArgumentError("batch.points[0].name: bad")) {
    absl::MutexLock lock(&mu_);
    reject_ = sequence_number;
    reject_status_ = std::move(status);
  }

  std::vector<Received> received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }
  int connects() {
    absl::MutexLock lock(&mu_);
    return connects_;
  }
  // Waits until `pred(received batches)` holds.
  template <typename Pred>
  bool WaitFor(Pred pred, absl::Duration timeout = kLong) {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pred(received_);
    };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }

  // MetricTransport, called by the emitter's threads.
  absl::Status Connect() {
    absl::MutexLock lock(&mu_);
    if (!up_) return absl::UnavailableError("service down");
    ++connects_;
    ++stream_;
    open_ = true;
    acks_.clear();
    end_ = absl::OkStatus();
    return absl::OkStatus();
  }
  bool Send(const MetricBatch& batch) {
    absl::MutexLock lock(&mu_);
    if (!up_ || !open_ || !end_.ok()) return false;
    received_.push_back({stream_, batch});
    if (reject_ != 0 && batch.sequence_number() == reject_) {
      reject_ = 0;
      end_ = reject_status_;
      return true;
    }
    if (auto_ack_) acks_.push_back(batch.sequence_number());
    return true;
  }
  absl::StatusOr<int64_t> ReadAck() {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !acks_.empty() || !end_.ok() || !open_;
    };
    mu_.Await(absl::Condition(&ready));
    if (!acks_.empty()) {
      const int64_t ack = acks_.front();
      acks_.pop_front();
      return ack;
    }
    if (!end_.ok()) return end_;
    return absl::UnavailableError("stream closed");
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }

 private:
  absl::Mutex mu_;
  bool up_ ABSL_GUARDED_BY(mu_) = true;
  bool auto_ack_ ABSL_GUARDED_BY(mu_) = true;
  int64_t reject_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status reject_status_ ABSL_GUARDED_BY(mu_);
  int connects_ ABSL_GUARDED_BY(mu_) = 0;
  int stream_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> acks_ ABSL_GUARDED_BY(mu_);
  std::vector<Received> received_ ABSL_GUARDED_BY(mu_);
};

class FakeTransport : public MetricTransport {
 public:
  explicit FakeTransport(std::shared_ptr<FakeService> service)
      : service_(std::move(service)) {}
  absl::Status Connect() override { return service_->Connect(); }
  bool Send(const MetricBatch& batch) override { return service_->Send(batch); }
  absl::StatusOr<int64_t> ReadAck() override { return service_->ReadAck(); }
  void Close() override { service_->Close(); }

 private:
  std::shared_ptr<FakeService> service_;
};

EmitterOptions TestOptions() {
  EmitterOptions o;
  o.source = "learner/0";
  o.incarnation = 42;
  o.batch_interval = absl::Milliseconds(20);
  o.min_backoff = absl::Milliseconds(5);
  o.max_backoff = absl::Milliseconds(50);
  return o;
}

std::unique_ptr<Emitter> MakeEmitter(std::shared_ptr<FakeService> service,
                                     EmitterOptions options = TestOptions()) {
  return std::make_unique<Emitter>(std::make_unique<FakeTransport>(service),
                                   std::move(options));
}

// Each distinct sequence number once (the first copy received), in order.
std::vector<MetricBatch> Unique(
    const std::vector<FakeService::Received>& received) {
  std::map<int64_t, MetricBatch> by_seq;
  for (const auto& r : received) {
    by_seq.try_emplace(r.batch.sequence_number(), r.batch);
  }
  std::vector<MetricBatch> out;
  for (auto& [seq, b] : by_seq) out.push_back(std::move(b));
  return out;
}

int64_t CountPoints(const std::vector<MetricBatch>& batches) {
  int64_t n = 0;
  for (const MetricBatch& b : batches) n += b.points_size();
  return n;
}

bool HasSequence(const std::vector<FakeService::Received>& received,
                 int64_t seq, int min_stream = 0) {
  for (const auto& r : received) {
    if (r.batch.sequence_number() == seq && r.stream >= min_stream) {
      return true;
    }
  }
  return false;
}

TEST(EmitterTest, DisabledEmitterIsANoOp) {
  Emitter emitter(nullptr);
  EXPECT_FALSE(emitter.enabled());
  emitter.SetRun("run-1");
  for (int i = 0; i < 1000; ++i) {
    emitter.Emit("loss", i, 1.0);
    emitter.Emit("loss", i, 1.0, {{"actor", "1"}});
  }
  EXPECT_OK(emitter.Flush(absl::Seconds(1)));
  const EmitterStats stats = emitter.stats();
  EXPECT_EQ(stats.emitted, 0);
  EXPECT_EQ(stats.dropped, 0);
  EXPECT_EQ(stats.sent_batches, 0);
  EXPECT_EQ(stats.connects, 0);
  EXPECT_FALSE(stats.connected);
}

TEST(EmitterTest, DeliversPointsWithSourceRunAndLabels) {
  auto service = std::make_shared<FakeService>();
  auto emitter = MakeEmitter(service);
  EXPECT_TRUE(emitter->enabled());
  const int64_t before = absl::ToUnixNanos(absl::Now());
  emitter->Emit("learner/loss", 1, 1.5);
  emitter->Emit("learner/entropy", 2, -0.25);
  emitter->SetRun("run-7");
  emitter->Emit("actor/return", 3, 200.0,
                {{"env", "cartpole"}, {"actor", "3"}});
  emitter->Emit("actor/return", 4, 201.0,
                {{"actor", "3"}, {"env", "cartpole"}});
  emitter->Emit("actor/return", 5, 202.0, {{"actor", "4"}});
  ASSERT_OK(emitter->Flush(kLong));
  const int64_t after = absl::ToUnixNanos(absl::Now());

  const std::vector<MetricBatch> batches = Unique(service->received());
  ASSERT_GE(batches.size(), 2u);
  std::vector<std::pair<std::string, MetricPoint>> points;  // run, point
  int64_t expected_seq = 1;
  for (const MetricBatch& b : batches) {
    EXPECT_EQ(b.sequence_number(), expected_seq++);
    EXPECT_EQ(b.source(), "learner/0");
    EXPECT_EQ(b.incarnation(), 42);
    EXPECT_EQ(b.dropped_points(), 0);
    for (const MetricPoint& p : b.points()) points.push_back({b.run_id(), p});
  }
  ASSERT_EQ(points.size(), 5u);
  EXPECT_EQ(points[0].first, "system");
  EXPECT_EQ(points[0].second.name(), "learner/loss");
  EXPECT_EQ(points[0].second.step(), 1);
  EXPECT_EQ(points[0].second.value(), 1.5);
  EXPECT_TRUE(points[0].second.labels().empty());
  EXPECT_EQ(points[1].first, "system");
  EXPECT_EQ(points[1].second.name(), "learner/entropy");
  EXPECT_EQ(points[1].second.step(), 2);
  EXPECT_EQ(points[1].second.value(), -0.25);
  for (int i = 2; i < 5; ++i) {
    EXPECT_EQ(points[i].first, "run-7");
    EXPECT_EQ(points[i].second.name(), "actor/return");
    EXPECT_EQ(points[i].second.step(), i + 1);
    EXPECT_EQ(points[i].second.value(), 198.0 + i);
  }
  // Label order does not matter.
  EXPECT_EQ(points[2].second.labels().size(), 2u);
  EXPECT_EQ(points[2].second.labels().at("env"), "cartpole");
  EXPECT_EQ(points[2].second.labels().at("actor"), "3");
  EXPECT_EQ(points[3].second.labels().size(), 2u);
  EXPECT_EQ(points[3].second.labels().at("actor"), "3");
  EXPECT_EQ(points[4].second.labels().size(), 1u);
  EXPECT_EQ(points[4].second.labels().at("actor"), "4");
  // Wall times are (coarse) real time.
  for (const auto& [run, p] : points) {
    EXPECT_GE(p.wall_time_ns(), before - 1000000000);
    EXPECT_LE(p.wall_time_ns(), after + 1000000000);
  }
  // A batch never mixes runs.
  for (const MetricBatch& b : batches) {
    for (const MetricPoint& p : b.points()) {
      EXPECT_EQ(p.name() == "actor/return", b.run_id() == "run-7");
    }
  }
  const EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.emitted, 5);
  EXPECT_EQ(stats.dropped, 0);
  EXPECT_EQ(stats.acked_points, 5);
  EXPECT_EQ(stats.unacked_points, 0);
  EXPECT_EQ(stats.acked_sequence_number, static_cast<int64_t>(batches.size()));
  EXPECT_TRUE(stats.connected);
  EXPECT_EQ(stats.connects, 1);
}

// A learner rank's points all carry its rank; a point's own labels win.
TEST(EmitterTest, DefaultLabelsMergeUnderAPointsOwn) {
  auto service = std::make_shared<FakeService>();
  auto emitter = MakeEmitter(service);
  emitter->Emit("learner/loss", 1, 1.0);
  emitter->SetDefaultLabels({{"rank", "1"}});
  emitter->Emit("learner/loss", 2, 2.0);
  emitter->Emit("learner/loss", 3, 3.0, {{"env", "cartpole"}});
  emitter->Emit("learner/loss", 4, 4.0, {{"rank", "7"}});
  emitter->SetDefaultLabels({});
  emitter->Emit("learner/loss", 5, 5.0);
  ASSERT_OK(emitter->Flush(kLong));
  std::vector<MetricPoint> points;
  for (const MetricBatch& b : Unique(service->received())) {
    for (const MetricPoint& p : b.points()) points.push_back(p);
  }
  ASSERT_EQ(points.size(), 5u);
  EXPECT_TRUE(points[0].labels().empty());
  EXPECT_EQ(points[1].labels().size(), 1u);
  EXPECT_EQ(points[1].labels().at("rank"), "1");
  EXPECT_EQ(points[2].labels().size(), 2u);
  EXPECT_EQ(points[2].labels().at("rank"), "1");
  EXPECT_EQ(points[2].labels().at("env"), "cartpole");
  EXPECT_EQ(points[3].labels().size(), 1u);
  EXPECT_EQ(points[3].labels().at("rank"), "7");
  EXPECT_TRUE(points[4].labels().empty());
}

TEST(EmitterTest, BatchMaxPointsSplitsBatches) {
  auto service = std::make_shared<FakeService>();
  EmitterOptions o = TestOptions();
  o.batch_max_points = 10;
  auto emitter = MakeEmitter(service, o);
  for (int i = 0; i < 95; ++i) emitter->Emit("x", i, i);
  ASSERT_OK(emitter->Flush(kLong));
  const std::vector<MetricBatch> batches = Unique(service->received());
  EXPECT_GE(batches.size(), 10u);
  int64_t next_step = 0;
  for (const MetricBatch& b : batches) {
    EXPECT_GE(b.points_size(), 1);
    EXPECT_LE(b.points_size(), 10);
    for (const MetricPoint& p : b.points()) EXPECT_EQ(p.step(), next_step++);
  }
  EXPECT_EQ(next_step, 95);
}

TEST(EmitterTest, FlushWaitsForAcknowledgement) {
  auto service = std::make_shared<FakeService>();
  service->SetAutoAck(false);
  auto emitter = MakeEmitter(service);
  for (int i = 0; i < 10; ++i) emitter->Emit("x", i, i);
  EXPECT_THAT(emitter->Flush(absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  // The batch reached the service but is not acknowledged.
  ASSERT_TRUE(service->WaitFor([](const std::vector<FakeService::Received>& r) {
    return CountPoints(Unique(r)) == 10;
  }));
  EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.unacked_points, 10);
  EXPECT_EQ(stats.acked_points, 0);
  const int64_t last_seq = Unique(service->received()).back().sequence_number();
  service->Ack(last_seq);
  EXPECT_OK(emitter->Flush(kLong));
  stats = emitter->stats();
  EXPECT_EQ(stats.unacked_points, 0);
  EXPECT_EQ(stats.acked_points, 10);
  EXPECT_EQ(stats.acked_sequence_number, last_seq);
}

TEST(EmitterTest, FlushReturnsOnlyWhenEverythingIsDelivered) {
  // Repeated: Flush must never report success for points not yet
  // acknowledged (e.g. drained from the ring but not yet in a batch).
  auto service = std::make_shared<FakeService>();
  EmitterOptions o = TestOptions();
  o.batch_interval = absl::Seconds(10);  // only Flush seals small batches
  auto emitter = MakeEmitter(service, o);
  int64_t total = 0;
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + round % 7;
    for (int i = 0; i < n; ++i) {
      emitter->Emit("x", total++, 1.0, {{"round", absl::StrCat(round % 3)}});
    }
    ASSERT_OK(emitter->Flush(kLong));
    ASSERT_EQ(CountPoints(Unique(service->received())), total)
        << "round " << round;
  }
}

TEST(EmitterTest, TransportDownAtStartNeverBlocksAndDeliversLater) {
  auto service = std::make_shared<FakeService>();
  service->SetUp(false);
  EmitterOptions o = TestOptions();
  o.queue_capacity = 1024;
  o.max_unacked_points = 4096;
  o.batch_max_points = 512;
  auto emitter = MakeEmitter(service, o);
  constexpr int64_t kCalls = 1000000;
  for (int64_t i = 0; i < kCalls; ++i) emitter->Emit("x", i, 0.5);
  EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.emitted + stats.dropped, kCalls);
  // At most the ring plus the unacknowledged budget is accepted.
  EXPECT_GE(stats.emitted, 1024);
  EXPECT_LE(stats.emitted, 1024 + 4096);
  EXPECT_GE(stats.dropped, kCalls - 1024 - 4096);
  EXPECT_FALSE(stats.connected);
  EXPECT_EQ(stats.connects, 0);
  EXPECT_EQ(stats.acked_points, 0);
  EXPECT_TRUE(service->received().empty());
  EXPECT_THAT(emitter->Flush(absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));

  service->SetUp(true);
  ASSERT_OK(emitter->Flush(kLong));
  const int64_t accepted = stats.emitted;
  const int64_t dropped = stats.dropped;
  std::vector<MetricBatch> batches = Unique(service->received());
  // Everything accepted is delivered, once, in order.
  std::vector<int64_t> steps;
  for (const MetricBatch& b : batches) {
    EXPECT_LE(b.points_size(), 512);
    for (const MetricPoint& p : b.points()) steps.push_back(p.step());
  }
  ASSERT_EQ(static_cast<int64_t>(steps.size()), accepted);
  EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()));
  EXPECT_EQ(std::set<int64_t>(steps.begin(), steps.end()).size(), steps.size());
  EXPECT_EQ(steps.front(), 0);  // the first points were accepted
  stats = emitter->stats();
  EXPECT_EQ(stats.acked_points, accepted);
  EXPECT_EQ(stats.dropped, dropped);

  // Later batches report the drops.
  emitter->Emit("y", 1, 1.0);
  ASSERT_OK(emitter->Flush(kLong));
  batches = Unique(service->received());
  ASSERT_FALSE(batches.empty());
  EXPECT_EQ(batches.back().points_size(), 1);
  EXPECT_EQ(batches.back().points(0).name(), "y");
  EXPECT_EQ(batches.back().dropped_points(), dropped);
  EXPECT_GT(batches.back().dropped_points(), 0);
}

TEST(EmitterTest, ResendAfterDisconnectKeepsSequenceNumbers) {
  auto service = std::make_shared<FakeService>();
  service->SetAutoAck(false);
  auto emitter = MakeEmitter(service);
  for (int i = 0; i < 5; ++i) emitter->Emit("a", i, i);
  ASSERT_TRUE(service->WaitFor([](const std::vector<FakeService::Received>& r) {
    return CountPoints(Unique(r)) == 5;
  }));
  for (int i = 5; i < 12; ++i) emitter->Emit("a", i, i);
  ASSERT_TRUE(service->WaitFor([](const std::vector<FakeService::Received>& r) {
    return CountPoints(Unique(r)) == 12;
  }));
  const std::vector<MetricBatch> first = Unique(service->received());
  const int64_t last_seq = first.back().sequence_number();
  ASSERT_GE(last_seq, 2);
  EXPECT_EQ(emitter->stats().unacked_points, 12);

  // The stream breaks; nothing was acknowledged. After the reconnect every
  // batch is resent with its sequence number.
  service->SetUp(false);
  service->SetUp(true);
  ASSERT_TRUE(
      service->WaitFor([last_seq](const std::vector<FakeService::Received>& r) {
        for (int64_t s = 1; s <= last_seq; ++s) {
          if (!HasSequence(r, s, /*min_stream=*/2)) return false;
        }
        return true;
      }));
  EXPECT_GE(service->connects(), 2);
  const std::vector<FakeService::Received> received = service->received();
  std::map<int64_t, std::string> content;
  for (const auto& r : received) {
    const int64_t seq = r.batch.sequence_number();
    EXPECT_GE(seq, 1);
    EXPECT_LE(seq, last_seq) << "resent batch got a new sequence number";
    auto [it, inserted] = content.try_emplace(seq, r.batch.SerializeAsString());
    if (!inserted) {
      EXPECT_EQ(it->second, r.batch.SerializeAsString())
          << "resent batch " << seq << " differs";
    }
  }
  EXPECT_EQ(CountPoints(Unique(received)), 12);

  service->Ack(last_seq);
  ASSERT_OK(emitter->Flush(kLong));
  EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.unacked_points, 0);
  EXPECT_EQ(stats.acked_points, 12);
  EXPECT_EQ(stats.acked_sequence_number, last_seq);

  // New points continue the numbering.
  service->SetAutoAck(true);
  emitter->Emit("b", 0, 0);
  ASSERT_OK(emitter->Flush(kLong));
  const std::vector<MetricBatch> all = Unique(service->received());
  EXPECT_EQ(all.back().sequence_number(), last_seq + 1);
  EXPECT_EQ(all.back().points(0).name(), "b");
}

TEST(EmitterTest, RejectedBatchIsDroppedNotResent) {
  auto service = std::make_shared<FakeService>();
  EmitterOptions o = TestOptions();
  o.batch_interval = absl::Seconds(10);  // batches sealed by Flush only
  auto emitter = MakeEmitter(service, o);
  for (int i = 0; i < 3; ++i) emitter->Emit("good", i, i);
  ASSERT_OK(emitter->Flush(kLong));
  const int64_t next_seq =
      Unique(service->received()).back().sequence_number() + 1;

  service->RejectOnce(next_seq);
  for (int i = 0; i < 4; ++i) emitter->Emit("bad", i, i);
  ASSERT_OK(emitter->Flush(kLong));
  EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.dropped, 4);
  EXPECT_EQ(stats.rejected_batches, 1);
  EXPECT_EQ(stats.unacked_points, 0);

  for (int i = 0; i < 2; ++i) emitter->Emit("later", i, i);
  ASSERT_OK(emitter->Flush(kLong));
  const std::vector<FakeService::Received> received = service->received();
  int copies = 0;
  for (const auto& r : received) {
    if (r.batch.sequence_number() == next_seq) ++copies;
  }
  EXPECT_EQ(copies, 1) << "the rejected batch was resent";
  const std::vector<MetricBatch> batches = Unique(received);
  EXPECT_EQ(batches.back().points(0).name(), "later");
  EXPECT_GT(batches.back().sequence_number(), next_seq);
  EXPECT_EQ(batches.back().dropped_points(), 4);
  stats = emitter->stats();
  EXPECT_EQ(stats.acked_points, 5);
  EXPECT_EQ(stats.unacked_points, 0);
  EXPECT_GE(stats.connects, 2);
}

// A batch the service refuses for good (a run beyond max_runs, a series
// beyond max_series_per_run) is dropped and counted like a malformed one; it
// does not hold up the batches after it.
TEST(EmitterTest, PermanentlyRefusedBatchIsDroppedAndLaterOnesDelivered) {
  auto service = std::make_shared<FakeService>();
  EmitterOptions o = TestOptions();
  o.batch_interval = absl::Seconds(10);  // batches sealed by Flush only
  auto emitter = MakeEmitter(service, o);
  for (int i = 0; i < 3; ++i) emitter->Emit("good", i, i);
  ASSERT_OK(emitter->Flush(kLong));
  const int64_t refused_seq =
      Unique(service->received()).back().sequence_number() + 1;

  service->RejectOnce(refused_seq,
                      absl::FailedPreconditionError(
                          "run run-9 would be a new run beyond the 3 runs "
                          "stored, at most 3 (max_runs)"));
  for (int i = 0; i < 4; ++i) emitter->Emit("refused", i, i);
  ASSERT_OK(emitter->Flush(kLong));
  EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.dropped, 4);
  EXPECT_EQ(stats.rejected_batches, 1);
  EXPECT_EQ(stats.unacked_points, 0);

  for (int i = 0; i < 2; ++i) emitter->Emit("later", i, i);
  ASSERT_OK(emitter->Flush(kLong));
  const std::vector<FakeService::Received> received = service->received();
  int copies = 0;
  for (const auto& r : received) {
    if (r.batch.sequence_number() == refused_seq) ++copies;
  }
  EXPECT_EQ(copies, 1) << "the refused batch was resent";
  const std::vector<MetricBatch> batches = Unique(received);
  EXPECT_EQ(batches.back().points(0).name(), "later");
  EXPECT_GT(batches.back().sequence_number(), refused_seq);
  stats = emitter->stats();
  EXPECT_EQ(stats.acked_points, 5);
  EXPECT_EQ(stats.unacked_points, 0);
  EXPECT_EQ(stats.rejected_batches, 1);
}

// RESOURCE_EXHAUSTED is the service's shared ingest budget: transient, so
// the batch is resent, not dropped.
TEST(EmitterTest, BatchRefusedForTheIngestBudgetIsResent) {
  auto service = std::make_shared<FakeService>();
  EmitterOptions o = TestOptions();
  o.batch_interval = absl::Seconds(10);
  auto emitter = MakeEmitter(service, o);
  emitter->Emit("first", 0, 0);
  ASSERT_OK(emitter->Flush(kLong));
  const int64_t busy_seq =
      Unique(service->received()).back().sequence_number() + 1;
  service->RejectOnce(busy_seq, absl::ResourceExhaustedError(
                                    "telemetry ingest budget spent; resend "
                                    "later"));
  for (int i = 0; i < 4; ++i) emitter->Emit("busy", i, i);
  ASSERT_OK(emitter->Flush(kLong));
  int copies = 0;
  for (const auto& r : service->received()) {
    if (r.batch.sequence_number() == busy_seq) ++copies;
  }
  EXPECT_GE(copies, 2);
  const EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.dropped, 0);
  EXPECT_EQ(stats.rejected_batches, 0);
  EXPECT_EQ(stats.acked_points, 5);
}

TEST(EmitterTest, TooLongNamesAreDroppedAndCounted) {
  auto service = std::make_shared<FakeService>();
  auto emitter = MakeEmitter(service);
  const std::string longest(Emitter::kMaxNameBytes, 'n');
  emitter->Emit(std::string(Emitter::kMaxNameBytes + 1, 'x'), 1, 1.0);
  emitter->Emit(std::string(1000, 'y'), 1, 1.0, {{"a", "b"}});
  emitter->Emit("", 1, 1.0);
  emitter->Emit(longest, 2, 2.0);
  ASSERT_OK(emitter->Flush(kLong));
  const EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.dropped, 3);
  EXPECT_EQ(stats.emitted, 1);
  const std::vector<MetricBatch> batches = Unique(service->received());
  ASSERT_EQ(CountPoints(batches), 1);
  EXPECT_EQ(batches.back().points(0).name(), longest);
  EXPECT_EQ(batches.back().dropped_points(), 3);
}

// A point the service would refuse (its name or labels beyond
// metric_limits.h) used to travel in a batch, and the service refused the
// whole batch: up to 4095 good points lost with it. It is dropped alone.
TEST(EmitterTest, PointsTheServiceWouldRefuseAreDroppedAloneNotTheirBatch) {
  auto service = std::make_shared<FakeService>();
  auto emitter = MakeEmitter(service);
  MetricLabelList seventeen;
  for (int i = 0; i < 17; ++i) seventeen.push_back({absl::StrCat("k", i), ""});
  emitter->Emit("good", 1, 1.0, {{"actor", "0"}});
  emitter->Emit("bad", 1, 1.0, {{"actor", std::string(300, 'v')}});
  emitter->Emit("tab\tname", 1, 1.0);
  emitter->Emit("bad", 1, 1.0, seventeen);
  emitter->Emit("bad", 1, 1.0, {{"", "empty key"}});
  emitter->Emit("bad", 1, 1.0, {{"actor", "line\nbreak"}});
  emitter->Emit("good", 2, 2.0, {{"actor", std::string(256, 'v')}});
  seventeen.pop_back();
  emitter->Emit("good", 3, 3.0, seventeen);
  ASSERT_OK(emitter->Flush(kLong));
  const EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.dropped, 5);
  EXPECT_EQ(stats.rejected_batches, 0);
  const std::vector<MetricBatch> batches = Unique(service->received());
  ASSERT_EQ(CountPoints(batches), 3);
  for (const MetricBatch& b : batches) {
    for (const MetricPoint& p : b.points()) EXPECT_EQ(p.name(), "good");
  }
}

// Points with many long labels: a batch of 4096 of them was ~17 MiB, over
// gRPC's 4 MiB a message, refused on every resend, and everything behind it
// waited for ever. Batches are sealed at about 1 MiB.
TEST(EmitterTest, BatchesStayFarUnderTheMessageLimit) {
  auto service = std::make_shared<FakeService>();
  EmitterOptions o = TestOptions();
  o.batch_interval = absl::Seconds(30);  // sealed by size alone
  auto emitter = MakeEmitter(service, o);
  MetricLabelList labels;
  for (int i = 0; i < 16; ++i) {
    labels.push_back({absl::StrCat("key", i), std::string(250, 'v')});
  }
  for (int i = 0; i < 600; ++i) emitter->Emit("wide", i, i, labels);
  ASSERT_OK(emitter->Flush(kLong));
  const std::vector<MetricBatch> batches = Unique(service->received());
  EXPECT_EQ(CountPoints(batches), 600);
  EXPECT_GE(batches.size(), 2u);
  for (const MetricBatch& b : batches) {
    EXPECT_LT(b.ByteSizeLong(), size_t{3} << 19) << b.sequence_number();
  }
}

TEST(EmitterTest, ConcurrentEmittersDeliverEveryAcceptedPointOnce) {
  auto service = std::make_shared<FakeService>();
  EmitterOptions o = TestOptions();
  o.queue_capacity = 4096;
  o.batch_max_points = 1000;
  auto emitter = MakeEmitter(service, o);
  constexpr int kThreads = 6;
  constexpr int kPerThread = 30000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&emitter, t] {
      const std::string name = absl::StrCat("thread/", t);
      const MetricLabelList labels = {{"thread", absl::StrCat(t)}};
      for (int i = 0; i < kPerThread; ++i) {
        if (i % 4 == 0) {
          emitter->Emit(name, i, t * 1000000.0 + i, labels);
        } else {
          emitter->Emit(name, i, t * 1000000.0 + i);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_OK(emitter->Flush(kLong));
  const EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.emitted + stats.dropped, int64_t{kThreads} * kPerThread);
  EXPECT_GT(stats.emitted, 0);

  std::set<std::pair<int, int64_t>> seen;
  std::vector<int64_t> last_step(kThreads, -1);
  for (const MetricBatch& b : Unique(service->received())) {
    for (const MetricPoint& p : b.points()) {
      ASSERT_EQ(p.name().rfind("thread/", 0), 0u) << p.name();
      const int t = std::stoi(p.name().substr(7));
      ASSERT_GE(t, 0);
      ASSERT_LT(t, kThreads);
      EXPECT_TRUE(seen.insert({t, p.step()}).second)
          << "duplicate point " << t << "/" << p.step();
      EXPECT_EQ(p.value(), t * 1000000.0 + p.step());
      // One thread's points keep their order.
      EXPECT_GT(p.step(), last_step[t]);
      last_step[t] = p.step();
      if (p.step() % 4 == 0) {
        ASSERT_EQ(p.labels().size(), 1u);
        EXPECT_EQ(p.labels().at("thread"), absl::StrCat(t));
      } else {
        EXPECT_TRUE(p.labels().empty());
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), stats.emitted);
  EXPECT_EQ(stats.acked_points, stats.emitted);
}

// A service that accepted the connection and then hung: Send blocks (flow
// control) until the stream is cancelled.
class HungTransport : public MetricTransport {
 public:
  absl::Status Connect() override {
    absl::MutexLock lock(&mu_);
    closed_ = false;
    return absl::OkStatus();
  }
  bool Send(const MetricBatch&) override {
    absl::MutexLock lock(&mu_);
    sending_ = true;
    mu_.Await(absl::Condition(&closed_));
    return false;
  }
  absl::StatusOr<int64_t> ReadAck() override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&closed_));
    return absl::UnavailableError("cancelled");
  }
  void Close() override {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  bool sending() {
    absl::MutexLock lock(&mu_);
    return sending_;
  }

 private:
  absl::Mutex mu_;
  bool closed_ = false;
  bool sending_ = false;
};

TEST(EmitterTest, ShutdownIsNotHeldUpByAHungService) {
  auto transport = std::make_unique<HungTransport>();
  HungTransport* hung = transport.get();
  auto emitter = std::make_unique<Emitter>(std::move(transport), TestOptions());
  emitter->Emit("m", 1, 1.0);
  ASSERT_TRUE(WaitFor([&] { return hung->sending(); }, absl::Seconds(60),
                      absl::Milliseconds(5)));
  // Emit still returns while the sender is stuck.
  for (int i = 0; i < 1000; ++i) emitter->Emit("m", i, 1.0);
  EXPECT_THAT(emitter->Flush(absl::Milliseconds(100)), Not(IsOk()));
  absl::Notification destroyed;
  std::thread destroyer([&] {
    emitter.reset();
    destroyed.Notify();
  });
  EXPECT_TRUE(destroyed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  destroyer.join();
}

}  // namespace
}  // namespace rl
