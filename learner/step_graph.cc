#include "learner/step_graph.h"

#include "absl/strings/str_cat.h"
#include "policy/cuda_runtime.h"

namespace rl {
namespace {

class DeferredStepGraph final : public StepGraph {
 public:
  explicit DeferredStepGraph(bool fail_capture) : fail_capture_(fail_capture) {}
  absl::Status Warm(const std::function<void()>& step) override {
    step();
    return absl::OkStatus();
  }
  absl::Status Capture(const std::function<void()>& step) override {
    if (step_) return absl::FailedPreconditionError("captured already");
    if (fail_capture_) {
      return absl::InternalError("capturing the CUDA graph: failed for a test");
    }
    step_ = step;
    return absl::OkStatus();
  }
  absl::Status Replay() override {
    if (!step_) return absl::FailedPreconditionError("nothing captured");
    step_();
    return absl::OkStatus();
  }

 private:
  const bool fail_capture_;
  std::function<void()> step_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepGraph>> NewCudaStepGraph(int device_index) {
  absl::StatusOr<void*> entry =
      LoadGpuExtension(kCudaGraphLibrary, kCudaGraphEntry);
  if (!entry.ok()) return entry.status();
  std::string error;
  StepGraph* graph =
      reinterpret_cast<NewCudaStepGraphFn>(*entry)(device_index, &error);
  if (graph == nullptr) {
    return absl::InternalError(
        absl::StrCat("a CUDA graph on cuda:", device_index, ": ", error));
  }
  return std::unique_ptr<StepGraph>(graph);
}

std::unique_ptr<StepGraph> NewDeferredStepGraph(bool fail_capture) {
  return std::make_unique<DeferredStepGraph>(fail_capture);
}

}  // namespace rl
