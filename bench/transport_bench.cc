// Transport: StreamRollouts bytes/s over loopback gRPC next to a plain TCP
// socket moving the same bytes, and next to the same-host path (segments
// through shared memory, common/shared_segments.h), in one run, for a
// 2.6 MiB and a 42 MiB segment (CartPole, E envs x 64 steps). Goals: gRPC
// >= 70% of the socket; shared memory faster than the actor's gRPC path.
//
//   bazel run --config=opt //bench:transport_bench [-- --rounds=3 --seconds=2]
//
// The server is a sink registered raw as the learner's StreamRollouts is: it
// parses each segment with ParseByteBuffer into a new RolloutSegment and
// acknowledges it. Two clients, each with at most `credits` segments
// unacknowledged, over the project's channel arguments (common/grpc_util):
//   zero-copy  the actor's way: RawClientStream writing SerializeAliased
//              segments, whose tensor bytes go to the socket from the
//              encoded segment itself;
//   protobuf   the generated stub, whose serialiser copies every byte into
//              new slices first (what the actor did before);
//   shared     the actor's same-host way: each segment serialised into a
//              slot of shared memory, its slot and length on the stream;
//              the sink parses it straight from the slot, as the learner
//              does, and its acks free the slot.
// The socket's reader drops the bytes into one reused buffer, its writer
// sends them from one buffer: no encoding, no parsing. Each round measures
// socket, zero-copy and protobuf in turn; the medians over rounds are
// printed, the ratios taken within each round.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <torch/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_message.h"
#include "common/grpc_util.h"
#include "common/process_memory.h"
#include "common/raw_client_stream.h"
#include "common/shared_segments.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"
#include "proto/learner.grpc.pb.h"

ABSL_FLAG(double, seconds, 2.0, "Seconds per measurement.");
ABSL_FLAG(int, rounds, 3, "Rounds of socket, zero-copy and protobuf.");
ABSL_FLAG(int, credits, 4, "Unacknowledged segments in flight.");
ABSL_FLAG(bool, keep_large_blocks_in_heap, true,
          "As learner_main does (common/process_memory.h): parsed segments "
          "reuse freed heap blocks instead of fresh pages. false: glibc's "
          "defaults.");

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kGoal = 0.70;
constexpr int kMaxMessageBytes = 512 << 20;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The learner's read path without the learner: parse (from the stream, or
// from the shared slot named), acknowledge.
class SinkReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit SinkReactor(std::unique_ptr<SharedSegmentReader> shared)
      : shared_(std::move(shared)) {
    {
      absl::MutexLock lock(&mu_);
      ack_.set_shared_memory(shared_ != nullptr);
    }
    StartRead(&incoming_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    auto segment = std::make_unique<RolloutSegment>();
    if (!ParseByteBuffer(&incoming_, segment.get(), "segment").ok()) {
      std::abort();
    }
    incoming_.Clear();
    if (segment->has_shared()) {
      const int64_t sequence_number = segment->sequence_number();
      if (shared_ == nullptr) std::abort();
      absl::StatusOr<absl::string_view> bytes =
          shared_->View({segment->shared().slot(), segment->shared().length()});
      if (!bytes.ok() ||
          !segment->ParseFromArray(bytes->data(),
                                   static_cast<int>(bytes->size())) ||
          segment->sequence_number() != sequence_number) {
        std::abort();
      }
    }
    absl::MutexLock lock(&mu_);
    ack_.set_acked_sequence_number(segment->sequence_number());
    if (!writing_) {
      WriteLocked();
    } else {
      pending_ = true;
    }
    StartRead(&incoming_);
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (ok && pending_) WriteLocked();
  }
  void OnDone() override { delete this; }

 private:
  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = true;
    pending_ = false;
    outgoing_ = SerializeCopy(ack_);
    StartWrite(&outgoing_);
  }

  const std::unique_ptr<SharedSegmentReader> shared_;
  grpc::ByteBuffer incoming_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;
  RolloutAck ack_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer outgoing_ ABSL_GUARDED_BY(mu_);
};

class SinkService final
    : public LearnerService::WithRawCallbackMethod_StreamRollouts<
          LearnerService::Service> {
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StreamRollouts(
      grpc::CallbackServerContext* context) override {
    const auto offer = context->client_metadata().find(kSharedSegmentsMetadata);
    std::unique_ptr<SharedSegmentReader> shared;
    if (offer != context->client_metadata().end()) {
      auto reader = SharedSegmentReader::Open(
          absl::string_view(offer->second.data(), offer->second.size()),
          kMaxMessageBytes);
      if (!reader.ok()) std::abort();
      shared = *std::move(reader);
    }
    return new SinkReactor(std::move(shared));
  }
};

RolloutSegment MakeSegment(int64_t envs, int64_t steps) {
  Rollout r = Rollout::Allocate(steps, envs, 4, 0);
  r.observations.uniform_();
  r.values.uniform_();
  RolloutSegment s;
  if (!EncodeSegment(r, &s).ok()) std::abort();
  s.mutable_env()->set_id("CartPole-v1");
  return s;
}

enum class Client { kZeroCopy, kProtobuf, kShared };

// The highest acknowledged sequence number, waited on without spinning
// (a spinning thread would take one of the two cores from gRPC).
class Acks {
 public:
  void Set(int64_t acked) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    acked_ = acked;
  }
  // Blocks until at most `limit` segments of the `sent` are unacknowledged.
  void AwaitAtMost(int64_t sent, int64_t limit) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto room = [&]() {
      mu_.AssertReaderHeld();
      return sent - acked_ <= limit;
    };
    mu_.Await(absl::Condition(&room));
  }

 private:
  absl::Mutex mu_;
  int64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
};

// Segments/s of `write` (it numbers and writes the next segment and returns
// its number): one before the clock (connection, windows, buffers), then
// for `seconds` with at most `credits` unacknowledged; waiting for the last
// ack is counted.
double TimedWrites(const std::function<int64_t()>& write, Acks& acks,
                   int credits, double seconds) {
  int64_t sent = write();
  acks.AwaitAtMost(sent, 0);
  const int64_t warm_up = sent;
  const Clock::time_point start = Clock::now();
  while (Since(start) < seconds) {
    acks.AwaitAtMost(sent, credits - 1);
    sent = write();
  }
  acks.AwaitAtMost(sent, 0);
  return (sent - warm_up) / Since(start);
}

// Segments/s for `seconds` of writing with at most `credits` unacknowledged
// (waiting for the last ack is counted).
double MeasureGrpc(const RolloutSegment& segment, Client client, double seconds,
                   int credits) {
  SinkService service;
  ServerOptions options;
  options.max_receive_message_bytes = kMaxMessageBytes;
  auto server = StartServer({&service}, options);
  if (!server.ok()) std::abort();
  ChannelOptions channel_options;
  channel_options.max_send_message_bytes = kMaxMessageBytes;
  const std::shared_ptr<grpc::Channel> channel =
      CreateChannel(absl::StrCat("127.0.0.1:", server->port), channel_options);
  grpc::ClientContext context;
  Acks acks;
  int64_t sent = 0;
  double rate = 0;
  if (client != Client::kProtobuf) {
    // kShared: the stream offers slots of shared memory, which acks free.
    std::unique_ptr<SharedSegmentWriter> writer;
    if (client == Client::kShared) {
      SharedSegmentWriter::Options shared_options;
      shared_options.slots = std::clamp(credits, 4, 64);
      auto created = SharedSegmentWriter::Create(shared_options);
      if (!created.ok()) std::abort();
      writer = *std::move(created);
      context.AddMetadata(kSharedSegmentsMetadata, writer->offer());
    }
    RawClientStream<RolloutAck> stream(
        channel,
        absl::StrCat("/", LearnerService::service_full_name(),
                     "/StreamRollouts"),
        &context);
    std::thread reader([&] {
      RolloutAck ack;
      while (stream.Read(&ack)) {
        if (writer != nullptr) {
          if (!ack.shared_memory()) std::abort();
          writer->Release(ack.acked_sequence_number());
        }
        acks.Set(ack.acked_sequence_number());
      }
    });
    std::function<int64_t()> write;
    RolloutSegment message = segment;
    // Distinct segments, as the actor sends: one is numbered again only
    // when no slice of gRPC's refers to it any more.
    std::vector<std::shared_ptr<RolloutSegment>> pool;
    if (writer != nullptr) {
      // As the actor's WriteShared: the segment into a slot, an envelope
      // on the stream.
      write = [&] {
        message.set_sequence_number(++sent);
        const int64_t size = static_cast<int64_t>(message.ByteSizeLong());
        auto slot = writer->Write(sent, size, [&](uint8_t* out) {
          message.SerializeWithCachedSizesToArray(out);
        });
        if (!slot.ok()) std::abort();
        RolloutSegment envelope;
        envelope.set_sequence_number(sent);
        envelope.mutable_shared()->set_slot(slot->slot);
        envelope.mutable_shared()->set_length(slot->length);
        if (!stream.Write(SerializeCopy(envelope))) std::abort();
        return sent;
      };
    } else {
      for (int i = 0; i < 2 * credits; ++i) {
        pool.push_back(std::make_shared<RolloutSegment>(segment));
      }
      write = [&] {
        std::shared_ptr<RolloutSegment>& next = pool[sent % pool.size()];
        while (next.use_count() > 1) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        next->set_sequence_number(++sent);
        if (!stream.Write(SerializeAliased(next))) std::abort();
        return sent;
      };
    }
    rate = TimedWrites(write, acks, credits, seconds);
    stream.WritesDone();
    reader.join();
    stream.Finish();
    server->server->Shutdown();
    return rate;
  }
  auto stub = LearnerService::NewStub(channel);
  auto stream = stub->StreamRollouts(&context);
  std::thread reader([&] {
    RolloutAck ack;
    while (stream->Read(&ack)) acks.Set(ack.acked_sequence_number());
  });
  RolloutSegment message = segment;  // copied by each Write: reusable
  auto write = [&] {
    message.set_sequence_number(++sent);
    if (!stream->Write(message)) std::abort();
    return sent;
  };
  rate = TimedWrites(write, acks, credits, seconds);
  stream->WritesDone();
  reader.join();
  stream->Finish();
  server->server->Shutdown();
  return rate;
}

// Segments/s of `bytes_per_segment` over a loopback TCP socket.
double MeasureSocket(size_t bytes_per_segment, double seconds) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  listen(listener, 1);
  std::atomic<int64_t> received{0};
  std::thread sink([&] {
    const int fd = accept(listener, nullptr, nullptr);
    std::vector<char> buffer(1 << 20);
    size_t in_segment = 0;
    while (true) {
      const ssize_t n = read(fd, buffer.data(), buffer.size());
      if (n <= 0) break;
      in_segment += n;
      while (in_segment >= bytes_per_segment) {
        in_segment -= bytes_per_segment;
        received++;
      }
    }
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  // The same bytes as a serialized segment, from a buffer (no encoding).
  std::vector<char> payload(bytes_per_segment, 7);
  const auto start = Clock::now();
  while (Since(start) < seconds) {
    size_t off = 0;
    while (off < payload.size()) {
      const ssize_t n = write(fd, payload.data() + off, payload.size() - off);
      if (n <= 0) std::abort();
      off += n;
    }
  }
  shutdown(fd, SHUT_WR);
  sink.join();
  const double elapsed = Since(start);
  close(fd);
  close(listener);
  return received / elapsed;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_keep_large_blocks_in_heap) &&
      !rl::KeepLargeBlocksInHeap()) {
    std::fprintf(stderr, "glibc refused the heap settings\n");
    return 1;
  }
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const int credits = absl::GetFlag(FLAGS_credits);
  std::printf(
      "StreamRollouts over loopback vs a raw TCP socket, same bytes, and vs "
      "shared memory (same host); median of %d rounds of %.1f s each, %d "
      "segments in flight; goals: gRPC >= %.0f%% of the socket, shared > "
      "zero-copy\n\n",
      rounds, seconds, credits, 100 * rl::kGoal);
  std::printf("%-24s %8s %10s %10s %8s %10s %8s %10s %8s  %s\n",
              "segment (CartPole)", "MiB", "socket", "zero-copy", "/socket",
              "protobuf", "/socket", "shared", "/zero-cp", "goals");
  std::printf("%-24s %8s %10s %10s %8s %10s %8s %10s %8s\n", "", "", "MiB/s",
              "MiB/s", "", "MiB/s", "", "MiB/s", "");
  for (int64_t envs : {1024, 16384}) {
    const rl::RolloutSegment segment = rl::MakeSegment(envs, 64);
    const double mib = segment.ByteSizeLong() / 1048576.0;
    std::vector<double> socket, zero_copy, protobuf, shared, zero_ratio,
        proto_ratio, shared_ratio;
    for (int round = 0; round < rounds; ++round) {
      socket.push_back(mib *
                       rl::MeasureSocket(segment.ByteSizeLong(), seconds));
      zero_copy.push_back(mib * rl::MeasureGrpc(segment, rl::Client::kZeroCopy,
                                                seconds, credits));
      protobuf.push_back(mib * rl::MeasureGrpc(segment, rl::Client::kProtobuf,
                                               seconds, credits));
      shared.push_back(mib * rl::MeasureGrpc(segment, rl::Client::kShared,
                                             seconds, credits));
      zero_ratio.push_back(zero_copy.back() / socket.back());
      proto_ratio.push_back(protobuf.back() / socket.back());
      shared_ratio.push_back(shared.back() / zero_copy.back());
    }
    const double ratio = rl::Median(zero_ratio);
    const double same_host = rl::Median(shared_ratio);
    std::printf(
        "%-24s %8.2f %10.0f %10.0f %7.0f%% %10.0f %7.0f%% %10.0f %7.2fx  "
        "%s, %s\n",
        absl::StrCat(envs, " envs x 64 steps").c_str(), mib, rl::Median(socket),
        rl::Median(zero_copy), 100 * ratio, rl::Median(protobuf),
        100 * rl::Median(proto_ratio), rl::Median(shared), same_host,
        ratio >= rl::kGoal ? "met" : "NOT met",
        same_host > 1 ? "met" : "NOT met");
    std::string per_round = "  zero-copy/socket by round:";
    for (double r : zero_ratio) absl::StrAppend(&per_round, " ", 100 * r, "%");
    absl::StrAppend(&per_round, "; shared/zero-copy by round:");
    for (double r : shared_ratio) absl::StrAppend(&per_round, " ", r, "x");
    std::printf("%s\n", per_round.c_str());
  }
  return 0;
}
