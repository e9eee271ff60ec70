// A fixed-shape computation captured once and replayed: the PPO update's
// minibatch step as a CUDA graph (execution.cuda_graphs), so that a small
// network's update is not bound by the host launching its ~170 kernels.
//
// The CUDA graph (at::cuda::CUDAGraph) lives in LibTorch's CUDA library,
// which the binaries do not link: libcuda_graph.so (learner/
// cuda_graph_ext.cc, built under --config=cuda) is loaded on demand, as
// libnccl_backend.so is. DeferredStepGraph has a CUDA graph's semantics on
// any device, for the CPU tests of the code that feeds a graph: a captured
// step does nothing until replayed, and a replay runs exactly what was
// captured, reading and writing the same tensors.
#ifndef RL_LEARNER_STEP_GRAPH_H_
#define RL_LEARNER_STEP_GRAPH_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace rl {

class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Runs `step` now, on the stream captures use (a warm-up: lazy
  // initialisations, e.g. cuBLAS's workspace, happen outside the capture).
  virtual absl::Status Warm(const std::function<void()>& step) = 0;
  // Captures `step`: its kernels are recorded, none runs. Once per graph.
  virtual absl::Status Capture(const std::function<void()>& step) = 0;
  // Runs what was captured, on the current stream.
  virtual absl::Status Replay() = 0;
};

// A CUDA graph on CUDA device `device_index` (its streams; every call
// under a guard of that device) from libcuda_graph.so (policy/
// cuda_runtime.h's LoadGpuExtension), after LibTorch's CUDA runtime;
// FAILED_PRECONDITION naming why it cannot load.
absl::StatusOr<std::unique_ptr<StepGraph>> NewCudaStepGraph(int device_index);

// The stand-in with a CUDA graph's semantics, for tests (`fail_capture`:
// every Capture fails, as an uncapturable step would).
std::unique_ptr<StepGraph> NewDeferredStepGraph(bool fail_capture = false);

// The function libcuda_graph.so exports: a new CUDA graph on a device
// (delete it), or null with the reason in *error.
inline constexpr char kCudaGraphLibrary[] = "libcuda_graph.so";
inline constexpr char kCudaGraphEntry[] = "rl_new_cuda_step_graph";
using NewCudaStepGraphFn = StepGraph* (*)(int device_index, std::string* error);

}  // namespace rl

#endif  // RL_LEARNER_STEP_GRAPH_H_
