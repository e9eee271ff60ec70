// Transport: StreamRollouts segments/s and bytes/s over loopback gRPC,
// printed next to a plain TCP socket moving the same bytes, in one run.
//
//   bazel run --config=opt //bench:transport_bench
//
// The gRPC side is a sink LearnerService (callback API, as the learner's)
// that acknowledges every segment; the client streams pre-encoded CartPole
// segments of E envs x 64 steps with at most `credits` unacknowledged.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <torch/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"
#include "proto/learner.grpc.pb.h"

ABSL_FLAG(double, seconds, 3.0, "Seconds per measurement.");
ABSL_FLAG(int, credits, 4, "Unacknowledged segments in flight.");

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

class SinkReactor final
    : public grpc::ServerBidiReactor<RolloutSegment, RolloutAck> {
 public:
  SinkReactor() { StartRead(&segment_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    absl::MutexLock lock(&mu_);
    ack_.set_acked_sequence_number(segment_.sequence_number());
    if (!writing_) {
      writing_ = true;
      out_ = ack_;
      StartWrite(&out_);
    } else {
      pending_ = true;
    }
    StartRead(&segment_);
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (ok && pending_) {
      pending_ = false;
      writing_ = true;
      out_ = ack_;
      StartWrite(&out_);
    }
  }
  void OnDone() override { delete this; }

 private:
  RolloutSegment segment_;
  absl::Mutex mu_;
  bool writing_ = false, pending_ = false;
  RolloutAck ack_, out_;
};

class SinkService final : public LearnerService::CallbackService {
  grpc::ServerBidiReactor<RolloutSegment, RolloutAck>* StreamRollouts(
      grpc::CallbackServerContext*) override {
    return new SinkReactor();
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

struct Figure {
  double segments_per_second;
  double bytes_per_second;
};

Figure MeasureGrpc(const RolloutSegment& segment, double seconds, int credits) {
  SinkService service;
  ServerOptions options;
  options.max_receive_message_bytes = 512 << 20;
  auto server = StartServer({&service}, options);
  if (!server.ok()) std::abort();
  ChannelOptions channel_options;
  channel_options.max_send_message_bytes = 512 << 20;
  auto stub = LearnerService::NewStub(CreateChannel(
      "127.0.0.1:" + std::to_string(server->port), channel_options));
  grpc::ClientContext context;
  auto stream = stub->StreamRollouts(&context);
  std::atomic<int64_t> acked{0};
  std::thread reader([&] {
    RolloutAck ack;
    while (stream->Read(&ack)) acked = ack.acked_sequence_number();
  });
  RolloutSegment message = segment;
  const auto start = Clock::now();
  int64_t sent = 0;
  grpc::WriteOptions write_options;
  while (std::chrono::duration<double>(Clock::now() - start).count() <
         seconds) {
    while (sent - acked.load() >= credits) std::this_thread::yield();
    message.set_sequence_number(++sent);
    stream->Write(message, write_options);
  }
  while (acked.load() < sent) std::this_thread::yield();
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - start).count();
  stream->WritesDone();
  reader.join();
  stream->Finish();
  server->server->Shutdown();
  const double size = static_cast<double>(message.ByteSizeLong());
  return {sent / elapsed, sent * size / elapsed};
}

Figure MeasureSocket(size_t bytes_per_segment, double seconds) {
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
  int64_t sent = 0;
  while (std::chrono::duration<double>(Clock::now() - start).count() <
         seconds) {
    size_t off = 0;
    while (off < payload.size()) {
      const ssize_t n = write(fd, payload.data() + off, payload.size() - off);
      if (n <= 0) std::abort();
      off += n;
    }
    ++sent;
  }
  shutdown(fd, SHUT_WR);
  sink.join();
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - start).count();
  close(fd);
  close(listener);
  return {received / elapsed, received * bytes_per_segment / elapsed};
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  std::printf("%-34s %12s %12s %12s %10s\n", "segment (CartPole, T=64)",
              "MiB/segment", "gRPC seg/s", "socket seg/s", "gRPC/socket");
  for (int64_t envs : {1024, 16384}) {
    const rl::RolloutSegment segment = rl::MakeSegment(envs, 64);
    const size_t bytes = segment.ByteSizeLong();
    const rl::Figure grpc =
        rl::MeasureGrpc(segment, seconds, absl::GetFlag(FLAGS_credits));
    const rl::Figure raw = rl::MeasureSocket(bytes, seconds);
    std::printf("%-34s %12.2f %12.1f %12.1f %9.0f%%\n",
                (std::to_string(envs) + " envs x 64 steps").c_str(),
                bytes / 1048576.0, grpc.segments_per_second,
                raw.segments_per_second,
                100 * grpc.bytes_per_second / raw.bytes_per_second);
    std::printf("%-34s %12s %10.0f MiB/s %8.0f MiB/s\n", "", "",
                grpc.bytes_per_second / 1048576.0,
                raw.bytes_per_second / 1048576.0);
  }
  return 0;
}
