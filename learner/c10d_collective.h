// A Collective over torch c10d: ranks meet at rank 0's TCPStore, then form a
// ProcessGroupGloo (CPU tensors) or, for CUDA learners, a ProcessGroupNCCL
// (loaded on demand: learner/nccl_backend.h). With nccl_backend, the one
// place that sees c10d's and gloo's types; everything else holds a
// Collective.
//
// Every learner process hosts a RendezvousServer (a TCPStore server) for its
// lifetime and reports its address to the coordinator at registration; when
// the learner is a gang's rank 0 the gang meets there, under a key prefix
// unique to the gang (run and placement), so gangs never see each other's
// keys.
#ifndef RL_LEARNER_C10D_COLLECTIVE_H_
#define RL_LEARNER_C10D_COLLECTIVE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "learner/collective.h"

namespace rl {

class RendezvousServer {
 public:
  // Listens on `port` (0: a free one) at `host`, a literal IPv4 or IPv6
  // address (127.0.0.1 in the loopback default: nothing off the machine
  // reaches it); "" or a wildcard: every interface. UNAVAILABLE when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(
      int port, const std::string& host = "127.0.0.1");
  ~RendezvousServer();
  int port() const;

 private:
  class Impl;
  explicit RendezvousServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct CollectiveOptions {
  int rank = 0;
  int world_size = 1;
  // HOST:PORT of rank 0's RendezvousServer.
  std::string rendezvous_address;
  // Unique per gang (e.g. "run-3/17"); every rank gives the same.
  std::string gang_id;
  // Every rank gives the same; the gang's keys in the rendezvous store are
  // named under it. c10d's TCPStore authenticates no one, but its protocol
  // cannot list keys: a process that does not know the secret (workers
  // derive it from their run key) can neither read the ranks' addresses nor
  // plant its own. The gang's traffic itself (gloo) is plaintext, as with
  // torchrun: keep learners on a private network.
  std::string store_secret;
  // The address this rank's collective binds and that peers reach it at.
  std::string bind_address = "127.0.0.1";
  // "gloo" (CPU tensors) or "nccl" (CUDA tensors of `device`, through
  // libnccl_backend.so: learner/nccl_backend.h). Tensors given elsewhere
  // are copied to where the backend takes them and back.
  std::string backend = "gloo";
  // NCCL's device, e.g. "cuda:0" (the learner's).
  std::string device = "cuda";
  // All ranks must have joined within this; else DEADLINE_EXCEEDED naming
  // the ranks that did not.
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // One collective call waits this long for its peers (a dead peer is seen
  // at once, through its closed connections).
  absl::Duration timeout = absl::Seconds(60);
  // Polled while waiting for the other ranks: true gives up (CANCELLED),
  // e.g. when the coordinator has placed the run anew meanwhile.
  std::function<bool()> cancelled;
};

// Joins the gang: INVALID_ARGUMENT for bad options, FAILED_PRECONDITION for
// nccl where LibTorch's CUDA runtime or libnccl_backend.so cannot load,
// UNAVAILABLE if rank 0's store cannot be reached, DEADLINE_EXCEEDED if some
// ranks never joined, CANCELLED.
absl::StatusOr<std::unique_ptr<Collective>> ConnectCollective(
    const CollectiveOptions& options);

}  // namespace rl

#endif  // RL_LEARNER_C10D_COLLECTIVE_H_
