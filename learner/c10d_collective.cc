// Built with -DUSE_C10D_GLOO against Debian's gloo headers (libgloo-dev,
// headers only): the gloo symbols come from libtorch_cpu, whose gloo is newer
// than those headers, so nothing gloo-typed leaves this file.
#include "learner/c10d_collective.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "learner/nccl_backend.h"
#include "policy/cuda_runtime.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

std::chrono::milliseconds ToChrono(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

absl::Status SplitHostPort(const std::string& address, std::string* host,
                           int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), port) || *port <= 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous_address: expected HOST:PORT, got \"", address, "\""));
  }
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::OkStatus();
}

// While alive, the calling thread runs under SCHED_BATCH, and so do the
// threads it starts (a Linux thread inherits its creator's policy); the
// caller's policy comes back at the end. Only from SCHED_OTHER, which needs
// no privilege.
//
// Why: gloo's network thread handles a socket event only if it can take
// the pair's lock at once; if not, it returns to epoll, which reports the
// same event again, so it spins. Woken by a peer's bytes, it preempted
// the thread holding that lock (the process group's worker, mid-send) and
// then spun until the scheduler's next tick: 4 and 8 ms stalls in about
// one all-reduce in ten on this 2-core machine. A SCHED_BATCH thread does
// not preempt on wakeup, so the lock's holder finishes first; the worker,
// woken by the network thread, no longer preempts it either. The threads
// keep their fair share of the CPU (unlike SCHED_IDLE), so a learner beside
// busy actors is not starved. Measured with bench/learner_scaling_bench, 2
// learners at the throughput configuration: 1.27-1.41x of one before,
// 1.71-1.76x with the network thread alone under SCHED_BATCH, 1.79-1.87x
// with both (1.87-1.98x pinned); the all-reduce's p90 from 7.8 ms to
// 0.4-2 ms.
class BatchPolicyForNewThreads {
 public:
  BatchPolicyForNewThreads() {
    policy_ = sched_getscheduler(0);
    sched_getparam(0, &param_);
    sched_param batch{};
    changed_ = policy_ == SCHED_OTHER &&
               sched_setscheduler(0, SCHED_BATCH, &batch) == 0;
  }
  ~BatchPolicyForNewThreads() {
    if (changed_) sched_setscheduler(0, policy_, &param_);
  }

 private:
  int policy_ = SCHED_OTHER;
  sched_param param_{};
  bool changed_ = false;
};

class C10dCollective : public Collective {
 public:
  // `device`: where the backend takes tensors (the CPU for gloo, the
  // learner's CUDA device for NCCL); a tensor elsewhere is copied there
  // and back, so callers need not know the backend.
  // `wait_timeout`: NCCL's work is waited for on the host with it (else a
  // wait only orders the device's stream, and a lost peer would surface as
  // NCCL's watchdog ending the process, not as an error here); 0 for gloo,
  // whose waits block and time out by themselves.
  C10dCollective(int rank, int world_size, std::string gang_id,
                 c10::intrusive_ptr<c10d::Backend> backend,
                 torch::Device device = torch::kCPU,
                 absl::Duration wait_timeout = absl::ZeroDuration())
      : rank_(rank),
        world_size_(world_size),
        gang_id_(std::move(gang_id)),
        backend_(std::move(backend)),
        device_(device),
        wait_timeout_(wait_timeout) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  absl::Status AllReduce(torch::Tensor& tensor, ReduceOp op) override {
    return Run("all-reduce", [&] {
      OnBackendDevice(tensor, [&](at::Tensor& t) {
        std::vector<at::Tensor> tensors{t};
        c10d::AllreduceOptions opts;
        opts.reduceOp =
            op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
        Wait(backend_->allreduce(tensors, opts));
      });
    });
  }

  absl::Status Broadcast(torch::Tensor& tensor, int root) override {
    return Run("broadcast", [&] {
      OnBackendDevice(tensor, [&](at::Tensor& t) {
        std::vector<at::Tensor> tensors{t};
        c10d::BroadcastOptions opts;
        opts.rootRank = root;
        Wait(backend_->broadcast(tensors, opts));
      });
    });
  }

 private:
  // A failed collective means the gang is broken (a peer died, hung up or
  // timed out): ABORTED, so the run restarts as a gang.
  template <typename F>
  absl::Status Run(const char* what, F&& fn) {
    absl::Status status = CatchTorchErrors(what, std::forward<F>(fn));
    if (status.ok()) return status;
    return absl::AbortedError(absl::StrCat(
        "learner gang ", gang_id_, ", rank ", rank_, " of ", world_size_, ": ",
        status.message(), " (a peer learner was lost or stalled)"));
  }

  void Wait(const c10::intrusive_ptr<c10d::Work>& work) {
    if (wait_timeout_ == absl::ZeroDuration()) {
      work->wait();
    } else {
      work->wait(ToChrono(wait_timeout_));
    }
  }

  // Runs `collective` on `tensor` where the backend takes it: in place, or
  // on a copy on device_ written back after.
  template <typename F>
  void OnBackendDevice(torch::Tensor& tensor, F&& collective) {
    if (tensor.device() == device_) {
      collective(tensor);
      return;
    }
    at::Tensor staged = tensor.to(device_);
    collective(staged);
    tensor.copy_(staged);
  }

  const int rank_;
  const int world_size_;
  const std::string gang_id_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  const torch::Device device_;
  const absl::Duration wait_timeout_;
};

// The NCCL process group's factory from libnccl_backend.so
// (policy/cuda_runtime.h's LoadGpuExtension).
absl::StatusOr<MakeNcclBackendFn> LoadNcclBackend() {
  absl::StatusOr<void*> entry =
      LoadGpuExtension(kNcclBackendLibrary, kNcclBackendEntry);
  if (!entry.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("backend nccl: ", entry.status().message()));
  }
  return reinterpret_cast<MakeNcclBackendFn>(*entry);
}

}  // namespace

class RendezvousServer::Impl {
 public:
  c10::intrusive_ptr<c10d::TCPStore> store;
};

namespace {

// A listening TCP socket on host:port (c10d's TCPStore would listen on
// every interface; it takes over a socket bound here instead).
absl::StatusOr<int> ListenOn(const std::string& host, int port) {
  const bool wildcard = host.empty() || host == "0.0.0.0" || host == "::";
  addrinfo hints{};
  hints.ai_family = wildcard ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int error = ::getaddrinfo(wildcard ? nullptr : host.c_str(),
                                      service.c_str(), &hints, &found);
      error != 0) {
    return absl::UnavailableError(absl::StrCat(
        "rendezvous store: cannot resolve ", host, ": ", gai_strerror(error)));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "rendezvous store: cannot listen on ", host, ":", port, ": ", why));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    int port, const std::string& host) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous_port: must be in [0, 65535] (got ", port, ")"));
  }
  ASSIGN_OR_RETURN(const int fd, ListenOn(host, port));
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6
                ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  auto impl = std::make_unique<Impl>();
  RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat("starting the rendezvous store on port ", port),
      [&] {
        c10d::TCPStoreOptions opts;
        opts.port = static_cast<uint16_t>(bound_port);
        opts.masterListenFd = fd;  // the store owns it from here
        opts.isServer = true;
        opts.waitWorkers = false;
        opts.numWorkers = std::nullopt;
        // The server's own client dials this: the address it listens on.
        impl->store = c10::make_intrusive<c10d::TCPStore>(
            host.empty() || host == "0.0.0.0" ? "127.0.0.1"
            : host == "::"                    ? "::1"
                                              : host,
            opts);
      },
      absl::StatusCode::kUnavailable));
  return std::unique_ptr<RendezvousServer>(
      new RendezvousServer(std::move(impl)));
}

RendezvousServer::RendezvousServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RendezvousServer::~RendezvousServer() = default;
int RendezvousServer::port() const { return impl_->store->getPort(); }

absl::StatusOr<std::unique_ptr<Collective>> ConnectCollective(
    const CollectiveOptions& options) {
  const int n = options.world_size;
  if (n < 1 || options.rank < 0 || options.rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " of world size ", n,
                     ": need 0 <= rank < world_size"));
  }
  if (options.gang_id.empty()) {
    return absl::InvalidArgumentError("gang_id: required");
  }
  MakeNcclBackendFn make_nccl = nullptr;
  torch::Device device = torch::kCPU;
  if (options.backend == "nccl") {
    // Before the rendezvous: a rank that cannot form the group says why
    // at once.
    RETURN_IF_ERROR(CatchTorchErrors(
        "the NCCL device", [&] { device = torch::Device(options.device); }));
    if (!device.is_cuda()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device: backend nccl takes a CUDA device, got \"",
                       options.device, "\""));
    }
    ASSIGN_OR_RETURN(make_nccl, LoadNcclBackend());
  } else if (options.backend != "gloo") {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend: expected gloo or nccl, got \"", options.backend, "\""));
  }
  std::string host;
  int port = 0;
  RETURN_IF_ERROR(SplitHostPort(options.rendezvous_address, &host, &port));

  const absl::Time deadline = absl::Now() + options.rendezvous_timeout;
  auto cancelled = [&]() -> absl::Status {
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError(absl::StrCat("rendezvous of learner gang ",
                                               options.gang_id, " abandoned"));
    }
    return absl::OkStatus();
  };
  // Short connection attempts, so that a cancel is seen between them.
  c10::intrusive_ptr<c10d::Store> store;
  while (true) {
    RETURN_IF_ERROR(cancelled());
    const absl::Status connected = CatchTorchErrors(
        absl::StrCat("connecting to rank 0's rendezvous store at ",
                     options.rendezvous_address),
        [&] {
          c10d::TCPStoreOptions opts;
          opts.port = static_cast<uint16_t>(port);
          opts.isServer = false;
          opts.waitWorkers = false;
          opts.timeout = ToChrono(std::min(
              absl::Seconds(2),
              std::max(absl::Milliseconds(100), deadline - absl::Now())));
          auto tcp = c10::make_intrusive<c10d::TCPStore>(host, opts);
          tcp->setTimeout(ToChrono(options.timeout));
          store = c10::make_intrusive<c10d::PrefixStore>(
              options.store_secret.empty()
                  ? absl::StrCat("rl/", options.gang_id)
                  : absl::StrCat("rl/", options.gang_id, "/",
                                 options.store_secret),
              tcp);
        },
        absl::StatusCode::kUnavailable);
    if (connected.ok()) break;
    if (absl::Now() > deadline) return connected;
  }

  // Our own barrier first, so that a rank that never comes is named.
  const auto joined_key = [](int r) { return absl::StrCat("joined/", r); };
  RETURN_IF_ERROR(CatchTorchErrors(
      "rendezvous",
      [&] { store->set(joined_key(options.rank), std::vector<uint8_t>{1}); },
      absl::StatusCode::kUnavailable));
  std::vector<int> missing;
  while (true) {
    RETURN_IF_ERROR(cancelled());
    missing.clear();
    RETURN_IF_ERROR(CatchTorchErrors(
        "rendezvous",
        [&] {
          for (int r = 0; r < n; ++r) {
            if (!store->check({joined_key(r)})) missing.push_back(r);
          }
        },
        absl::StatusCode::kUnavailable));
    if (missing.empty()) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rendezvous of learner gang ", options.gang_id, " at ",
          options.rendezvous_address, ": rank(s) ",
          absl::StrJoin(missing, ", "), " of ", n, " did not join within ",
          absl::FormatDuration(options.rendezvous_timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  c10::intrusive_ptr<c10d::Backend> backend;
  if (make_nccl != nullptr) {
    std::string error;
    if (!make_nccl(store, options.rank, n,
                   absl::ToInt64Milliseconds(options.timeout), &backend,
                   &error)) {
      return absl::UnavailableError(
          absl::StrCat("forming the NCCL process group of gang ",
                       options.gang_id, ": ", error));
    }
    return std::unique_ptr<Collective>(
        new C10dCollective(options.rank, n, options.gang_id, std::move(backend),
                           device, options.timeout));
  }
  RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat("forming the gloo process group of gang ", options.gang_id),
      [&] {
        auto opts =
            c10d::ProcessGroupGloo::Options::create(ToChrono(options.timeout));
        // gloo's network thread (started with the device) and the process
        // group's worker thread run under SCHED_BATCH; see
        // BatchPolicyForNewThreads.
        BatchPolicyForNewThreads batch;
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
            options.bind_address));
        opts->threads = 1;
        backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
            store, options.rank, n, opts);
      },
      absl::StatusCode::kUnavailable));
  return std::unique_ptr<Collective>(
      new C10dCollective(options.rank, n, options.gang_id, std::move(backend)));
}

}  // namespace rl
