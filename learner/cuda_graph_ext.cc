// libcuda_graph.so: a StepGraph (learner/step_graph.h) over LibTorch's
// at::cuda::CUDAGraph. Never ran on a GPU yet; the first-use self-check
// (learner/device_self_check.h) compares a graphed update with the CPU's
// before a run trains with it.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "learner/step_graph.h"

namespace rl {
namespace {

class CudaStepGraph final : public StepGraph {
 public:
  explicit CudaStepGraph(c10::DeviceIndex device)
      : device_(device),
        side_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)) {}

  absl::Status Warm(const std::function<void()>& step) override {
    return OnSideStream("warming up the CUDA graph's step", step);
  }

  absl::Status Capture(const std::function<void()>& step) override {
    return OnSideStream("capturing the CUDA graph", [&] {
      // Thread-local: other threads of the process (an actor's inference
      // in rl_local) may use the device while this one captures.
      graph_.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        step();
      } catch (...) {
        // End the capture, keeping the step's error, not capture_end's.
        try {
          graph_.capture_end();
        } catch (...) {
        }
        throw;
      }
      graph_.capture_end();
    });
  }

  absl::Status Replay() override {
    try {
      c10::cuda::CUDAGuard guard(device_);
      graph_.replay();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat("replaying the CUDA graph: ", e.what()));
    }
  }

 private:
  // `fn` on the side stream, ordered after the current stream's work and
  // before its later work.
  absl::Status OnSideStream(const char* what, const std::function<void()>& fn) {
    try {
      c10::cuda::CUDAGuard guard(device_);
      const c10::cuda::CUDAStream current =
          c10::cuda::getCurrentCUDAStream(device_);
      at::cuda::CUDAEvent before;
      before.record(current);
      before.block(side_);
      {
        c10::cuda::CUDAStreamGuard guard(side_);
        fn();
      }
      at::cuda::CUDAEvent after;
      after.record(side_);
      after.block(current);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(what, ": ", e.what()));
    }
  }

  const c10::DeviceIndex device_;
  c10::cuda::CUDAStream side_;
  at::cuda::CUDAGraph graph_;
};

}  // namespace
}  // namespace rl

extern "C" __attribute__((visibility("default"))) rl::StepGraph*
rl_new_cuda_step_graph(int device_index, std::string* error) {
  static_assert(
      std::is_same<decltype(&rl_new_cuda_step_graph), rl::NewCudaStepGraphFn>(),
      "the entry point's type is the header's");
  try {
    const auto device = static_cast<c10::DeviceIndex>(device_index);
    c10::cuda::CUDAGuard guard(device);
    return new rl::CudaStepGraph(device);
  } catch (const std::exception& e) {
    *error = e.what();
  } catch (...) {
    *error = "unknown exception";
  }
  return nullptr;
}

// Benches and checks: LibTorch's CUDA sync debug mode (0 off, 1 warn, 2
// error), torch.cuda.set_sync_debug_mode's C++ half: with 1, every
// synchronising CUDA call LibTorch makes warns ("called a synchronizing
// CUDA operation"), which a c10 warning handler can count.
extern "C" __attribute__((visibility("default"))) void
rl_cuda_set_sync_debug_mode(int mode) {
  c10::cuda::warning_state().set_sync_debug_mode(
      static_cast<c10::cuda::SyncDebugMode>(mode));
}
