// The collective a data-parallel learner gang trains through: one rank of
// `world_size`, with all-reduce and broadcast over tensors. The interface is
// free of c10d and gloo types; c10d_collective.h makes one over torch c10d
// (Gloo on CPU), and a gang of one needs none (callers pass null).
//
// Errors are Statuses: a peer that died or hung up is ABORTED (the gang must
// restart from its latest checkpoint; the coordinator does that), anything
// else keeps its code. The helpers below do the packing: every gradient of a
// minibatch crosses the wire as one flat buffer, never one call per tensor.
#ifndef RL_LEARNER_COLLECTIVE_H_
#define RL_LEARNER_COLLECTIVE_H_

#include <torch/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rl {

enum class ReduceOp { kSum, kMax };

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Reduces the contiguous CPU `tensor` elementwise over all ranks, in
  // place.
  virtual absl::Status AllReduce(torch::Tensor& tensor, ReduceOp op) = 0;
  // Copies rank `root`'s contiguous CPU `tensor` into every rank's (same
  // shape and dtype on every rank).
  virtual absl::Status Broadcast(torch::Tensor& tensor, int root) = 0;
};

// Sums `tensors` (float32 or float64, any shapes) over all ranks in place
// with one all-reduce of a flat float64 buffer.
absl::Status AllReduceSumCoalesced(Collective& collective,
                                   const std::vector<torch::Tensor>& tensors);

// Rank `root`'s `bytes` on every rank (two broadcasts: size, then bytes).
absl::Status BroadcastBytes(Collective& collective, std::string* bytes,
                            int root);

// A 64-bit FNV-1a hash of the tensors' bytes (in order).
uint64_t HashTensors(const std::vector<torch::Tensor>& tensors);

// OK if every rank holds the same `tensors` (compared by HashTensors, one
// all-reduce); else DATA_LOSS naming this rank, its hash and the range seen,
// on every rank.
absl::Status CheckInSync(Collective& collective,
                         const std::vector<torch::Tensor>& tensors,
                         const std::string& what);

}  // namespace rl

#endif  // RL_LEARNER_COLLECTIVE_H_
